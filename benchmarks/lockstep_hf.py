"""The HuggingFace side of benchmarks/lockstep.py, run in an interpreter with torch and
transformers (it imports nothing of kerasbert):

    <torch python> -m benchmarks.lockstep_hf <spec.json>

Loads the HF folder lockstep.py wrote from kerasbert's initial model (encoder and head) with
every dropout off, and takes the same training steps on the same batches (kerasbert's
feature rows, saved as .npz) with parity_hf.py's optimizer and step. Writes the loss of
every step to the spec's output file.
"""

import json
import sys

import numpy as np

from benchmarks import parity_hf  # the optimizer and step the parity runs use


def batch_of(torch, arrays, step, kind):
    """kerasbert's batch `step` (token_ids, segment_ids, padding_mask, labels) as the HF
    model's keyword arguments."""
    def ids(name):
        return torch.from_numpy(arrays[f"{name}_{step}"].astype(np.int64))

    batch = {"input_ids": ids("token_ids"), "token_type_ids": ids("segment_ids"),
             "attention_mask": ids("padding_mask")}
    labels = arrays[f"labels_{step}"]
    if kind == "span":
        batch["start_positions"] = torch.from_numpy(labels[:, 0].astype(np.int64))
        batch["end_positions"] = torch.from_numpy(labels[:, 1].astype(np.int64))
    elif kind == "regression":
        batch["labels"] = torch.from_numpy(labels.astype(np.float32))
    else:  # kerasbert's "no label here" is -1, torch's -100
        batch["labels"] = torch.from_numpy(np.where(labels < 0, -100, labels).astype(np.int64))
    return batch


def span_loss_without_padding(torch):
    """SQuAD's loss with padding out of the start/end softmax, as kerasbert's span head
    computes it (padding logit −10000). BertForQuestionAnswering's own loss covers the
    padding of the batch too: the one difference benchmarks/parity.py keeps on purpose; taken out
    here so that the lockstep compares the rest."""
    def loss_of(model, batch):
        batch = dict(batch)
        start, end = batch.pop("start_positions"), batch.pop("end_positions")
        out = model(**batch)
        keep = batch["attention_mask"].bool()

        def cross_entropy(logits, gold):
            return torch.nn.functional.cross_entropy(
                torch.where(keep, logits, torch.full_like(logits, -10000.0)), gold)

        return (cross_entropy(out.start_logits, start) + cross_entropy(out.end_logits, end)) / 2
    return loss_of


def main(spec_path):
    import torch
    import transformers

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    torch.manual_seed(0)  # dropout masks, when --dropout > 0 (no new weights)
    model = getattr(transformers, spec["hf_class"]).from_pretrained(
        spec["folder"], hidden_dropout_prob=spec["dropout"],
        attention_probs_dropout_prob=spec["dropout"], classifier_dropout=spec["dropout"])
    model.train()
    optimizer, schedule = parity_hf.adamw(torch, model, spec, spec["steps"],
                                          spec["warmup_steps"])
    arrays = np.load(spec["batches"])
    loss_of = span_loss_without_padding(torch) if spec["kind"] == "span" else None
    losses = [parity_hf.train_step(torch, model, batch_of(torch, arrays, step, spec["kind"]),
                                   optimizer, schedule, loss_of)
              for step in range(spec["steps"])]
    with open(spec["output_file"], "w", encoding="utf-8") as f:
        json.dump({"framework": f"PyTorch {torch.__version__} + transformers "
                   f"{transformers.__version__}", "losses": losses}, f)


if __name__ == "__main__":
    main(sys.argv[1])
