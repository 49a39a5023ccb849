"""The PyTorch reference of benchmarks/bench_training.py (run by it, in an interpreter that has
torch and transformers; imports nothing of kerasbert, which needs neither).

    <torch python> -m benchmarks.bench_training_torch <data.npz> <checkpoint folder> <steps> <warmup>

HuggingFace BertForSequenceClassification from the same safetensors, the classifier set to
the kerasbert head's initial weights, AdamW (lr 2e-5, weight decay 0.01 except biases and
LayerNorm, ε 1e-6), global-norm clipping 1.0: the step kerasbert's Trainer makes. Prints
one JSON line.
"""

import json
import resource
import sys
import time

import numpy as np

START = time.time()


def matmul_flops(torch, size=2048, repeats=10):
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return 2 * size**3 / float(np.median(times))


def main(data_path, checkpoint, steps, warmup):
    import torch
    from transformers import BertForSequenceClassification

    from_start = time.time() - START
    data = np.load(data_path)
    model = BertForSequenceClassification.from_pretrained(checkpoint, num_labels=2)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.from_numpy(data["head_kernel"].T.copy()))
        model.classifier.bias.copy_(torch.from_numpy(data["head_bias"]))
    model.train()
    loaded = time.time() - START
    no_decay = [p for n, p in model.named_parameters() if n.endswith("bias") or "LayerNorm" in n]
    decay = [p for n, p in model.named_parameters() if not (n.endswith("bias") or "LayerNorm" in n)]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=2e-5, betas=(0.9, 0.999), eps=1e-6)
    batch = {"input_ids": torch.from_numpy(data["token_ids"].astype(np.int64)),
             "token_type_ids": torch.from_numpy(data["segment_ids"].astype(np.int64)),
             "attention_mask": torch.from_numpy(data["padding_mask"].astype(np.int64)),
             "labels": torch.from_numpy(data["labels"].astype(np.int64))}
    times, losses, first_step_done = [], [], None
    for _ in range(warmup + steps):
        t = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss))
        times.append(time.perf_counter() - t)
        if first_step_done is None:
            first_step_done = time.time() - START
    print(json.dumps({
        "framework": f"PyTorch {torch.__version__} + transformers (eager)",
        "import_seconds": from_start, "loaded_seconds": loaded,
        "first_step_seconds": first_step_done, "step_times": times[warmup:],
        "losses": losses, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "matmul_flops": matmul_flops(torch), "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in model.parameters())}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
