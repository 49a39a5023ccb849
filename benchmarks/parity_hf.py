"""The HuggingFace side of benchmarks/parity.py: transformers + PyTorch, run by parity.py in an
interpreter that has torch and transformers. It imports nothing of kerasbert (which needs
neither, and may not be installed there).

    <torch python> -m benchmarks.parity_hf <spec.json>

The spec (written by parity.py) names the checkpoint, the examples (JSON lines that
kerasbert's own readers produced, so both sides train and score the same subset; for SQuAD
kerasbert's feature rows themselves, so that both have the same passage windows), the
recipe and the seed. The recipe is kerasbert's, done the HuggingFace way:
BertForSequenceClassification (pooler → dropout → linear; one output and MSE for
regression), BertForMultipleChoice, BertForTokenClassification (the first word piece of
each word labelled, the others -100), BertForQuestionAnswering; the models' own losses;
torch AdamW (β 0.9/0.999, ε 1e-6 as BERT and kerasbert, weight decay except biases and
LayerNorm), get_linear_schedule_with_warmup, global-norm clipping 1.0; shuffled each
epoch, the last
batch partial, each batch padded to its own longest row; a dev evaluation after every
epoch, as a kerasbert run makes. Writes one JSON file: the timings and the last epoch's
raw predictions (class ids, values, choices, tag ids per word, SQuAD start/end logits),
which parity.py scores (SQuAD: decodes, then scores) with kerasbert's own code.
"""

import json
import math
import os
import sys
import time

START = time.perf_counter()


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def lower_cases(folder):
    """As kerasbert decides: tokenizer_config.json's do_lower_case, else uncased when no
    vocabulary entry but the [SPECIAL] ones has an upper-case letter."""
    config = os.path.join(folder, "tokenizer_config.json")
    if os.path.isfile(config):
        with open(config, encoding="utf-8") as f:
            value = json.load(f).get("do_lower_case")
        if isinstance(value, bool):
            return value
    with open(os.path.join(folder, "vocab.txt"), encoding="utf-8", newline="") as f:
        tokens = [t.rstrip("\r") for t in f.read().split("\n")]
    return not any(t != t.lower() for t in tokens if not (t.startswith("[") and t.endswith("]")))


def pack(cls, sep, a, b, max_len):
    """[CLS] a [SEP] (b [SEP]) and segment ids; a pair too long loses tokens from the end
    of the longer text (of b on a tie), BERT's _truncate_seq_pair: the ids kerasbert makes."""
    if b is None:
        ids = [cls] + a[: max_len - 2] + [sep]
        return ids, [0] * len(ids)
    a, b = list(a), list(b)
    while len(a) + len(b) > max_len - 3:
        (a if len(a) > len(b) else b).pop()
    return [cls] + a + [sep] + b + [sep], [0] * (len(a) + 2) + [1] * (len(b) + 1)


def span_features(path):
    """SQuAD: kerasbert's feature rows (parity.py wrote them), each cut to its length."""
    import numpy as np

    data = np.load(path)
    lengths = data["padding_mask"].sum(-1)
    return [{"input_ids": data["token_ids"][r, :n].tolist(),
             "token_type_ids": data["segment_ids"][r, :n].tolist(),
             "labels": data["labels"][r].tolist()} for r, n in enumerate(lengths)]


def featurize(kind, rows, tokenizer, max_len):
    """One feature dict per example, and the number of words cut off (tagging only)."""
    cls, sep, unk = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.unk_token_id

    def pieces(texts):
        return tokenizer(list(texts), add_special_tokens=False)["input_ids"] if texts else []

    def feature(ids, segments, label):
        return {"input_ids": ids, "token_type_ids": segments, "labels": label}

    if kind == "tagging":  # every word pieced on its own, as kerasbert does
        flat, k, feats, cut = pieces([w for r in rows for w in r["words"]]), 0, [], 0
        for r in rows:
            ids, labels, firsts = [cls], [-100], []
            for j, tag in enumerate(r["tags"]):
                p = flat[k + j] or [unk]  # a word with no pieces is read as [UNK]
                if len(ids) + len(p) > max_len - 1:  # truncated, HF's way (kerasbert: windows)
                    cut += len(r["words"]) - j
                    break
                firsts.append(len(ids))
                labels += [tag] + [-100] * (len(p) - 1)
                ids += p
            k += len(r["words"])
            feats.append(dict(feature(ids + [sep], [0] * (len(ids) + 1), labels + [-100]),
                              firsts=firsts, num_words=len(r["words"])))
        return feats, cut
    a = pieces([r["a"] for r in rows])
    if kind == "multiple_choice":
        endings = pieces([e for r in rows for e in r["endings"]])
        feats, k = [], 0
        for r, a_ids in zip(rows, a):
            packed = [pack(cls, sep, a_ids, e, max_len) for e in endings[k: k + len(r["endings"])]]
            k += len(r["endings"])
            feats.append(feature([p[0] for p in packed], [p[1] for p in packed], r["label"]))
        return feats, 0
    b = pieces([r["b"] for r in rows]) if rows and rows[0].get("b") is not None else None
    return [feature(*pack(cls, sep, a_ids, b[i] if b else None, max_len), r["label"])
            for i, (r, a_ids) in enumerate(zip(rows, a))], 0


def collate(torch, feats, kind, pad_id):
    """A batch padded to its own longest row (multiple choice: [batch, choices, length])."""
    nested = kind == "multiple_choice"

    def rows(key):
        return [s for f in feats for s in f[key]] if nested else [f[key] for f in feats]

    width = max(len(s) for s in rows("input_ids"))

    def padded(key, value):
        t = torch.tensor([s + [value] * (width - len(s)) for s in rows(key)])
        return t.view(len(feats), -1, width) if nested else t

    batch = {"input_ids": padded("input_ids", pad_id),
             "token_type_ids": padded("token_type_ids", 0),
             "attention_mask": (padded("input_ids", -1) != -1).long()}  # -1: not an id
    if kind == "tagging":
        batch["labels"] = padded("labels", -100)
    elif kind == "span":
        batch["start_positions"] = torch.tensor([f["labels"][0] for f in feats])
        batch["end_positions"] = torch.tensor([f["labels"][1] for f in feats])
    elif feats[0]["labels"] is not None:
        batch["labels"] = torch.tensor([f["labels"] for f in feats],
                                       dtype=torch.float32 if kind == "regression" else torch.long)
    return batch


def predictions(torch, kind, feats, output, outside):
    """Raw predictions of a batch: class ids, values, choices, tag ids per word (words cut
    off by truncation get `outside`), or (SQuAD) the batch's [rows, length, 2] logits."""
    if kind == "span":
        return [torch.stack([output.start_logits, output.end_logits], -1).tolist()]
    logits = output.logits
    if kind == "regression":
        return logits[:, 0].tolist()
    if kind != "tagging":
        return logits.argmax(-1).tolist()
    best = logits.argmax(-1).tolist()
    return [[best[i][p] for p in f["firsts"]] + [outside] * (f["num_words"] - len(f["firsts"]))
            for i, f in enumerate(feats)]


def adamw(torch, model, spec, total, warmup):
    """(AdamW, schedule): kerasbert's recipe the PyTorch way, no weight decay on biases and
    LayerNorm, linear warmup over `warmup` of `total` steps then linear decay to 0."""
    from transformers import get_linear_schedule_with_warmup

    named = list(model.named_parameters())

    def no_decay(name):
        return name.endswith("bias") or "LayerNorm" in name

    optimizer = torch.optim.AdamW(
        [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": spec["weight_decay"]},
         {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}],
        lr=spec["learning_rate"], betas=(0.9, 0.999), eps=1e-6)
    return optimizer, get_linear_schedule_with_warmup(optimizer, warmup, total)


def train_step(torch, model, batch, optimizer, schedule, loss_of=None):
    """One step on `batch` (its labels included): the model's own loss (or `loss_of(model,
    batch)`), global-norm clipping at 1.0, the optimizer and schedule steps. Returns the
    loss."""
    loss = model(**batch).loss if loss_of is None else loss_of(model, batch)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    schedule.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def main(spec_path):
    import torch
    import transformers
    from transformers import (
        BertForMultipleChoice,
        BertForQuestionAnswering,
        BertForSequenceClassification,
        BertForTokenClassification,
        BertTokenizer,
    )

    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    kind, checkpoint, seed = spec["kind"], spec["checkpoint"], spec["seed"]
    # Three seeds (benchmarks/parity.py --vary_seed); a spec without them uses `seed` for
    # all three, exactly as before they existed: one global stream for the new head's
    # initialisation and then dropout, a generator of its own for the data order.
    head_seed = spec.get("head_init_seed", seed)
    dropout_seed = spec.get("dropout_seed", head_seed)
    torch.manual_seed(head_seed)
    tokenizer = BertTokenizer(os.path.join(checkpoint, "vocab.txt"),
                              do_lower_case=lower_cases(checkpoint))

    def load(path):
        if kind == "span":
            return span_features(path), 0
        return featurize(kind, read_jsonl(path), tokenizer, spec["max_seq_length"])

    train, cut = load(spec["train_file"])
    dev = {split: load(path) for split, path in spec["eval_files"].items()}
    if kind == "multiple_choice":
        model = BertForMultipleChoice.from_pretrained(checkpoint)
    elif kind == "span":
        model = BertForQuestionAnswering.from_pretrained(checkpoint)
    elif kind == "tagging":
        model = BertForTokenClassification.from_pretrained(checkpoint,
                                                           num_labels=spec["num_labels"])
    else:
        model = BertForSequenceClassification.from_pretrained(
            checkpoint, num_labels=spec["num_labels"],
            problem_type="regression" if kind == "regression" else None)
    size = spec["train_batch_size"]
    per_epoch = math.ceil(len(train) / size)  # kerasbert's count: a partial batch is a step
    total = math.ceil(per_epoch * spec["num_train_epochs"])
    warmup = int(total * spec["warmup_proportion"])
    optimizer, schedule = adamw(torch, model, spec, total, warmup)
    if dropout_seed != head_seed:  # dropout's masks from a stream of their own
        torch.manual_seed(dropout_seed)
    order = torch.Generator().manual_seed(spec.get("data_order_seed", seed))
    outside = spec.get("outside_label", 0)
    train_seconds = eval_seconds = 0.0
    losses, predicted = [], {}
    for epoch in range(math.ceil(spec["num_train_epochs"])):
        started = time.perf_counter()
        model.train()
        shuffled = torch.randperm(len(train), generator=order).tolist()
        steps, loss_sum = min(per_epoch, total - epoch * per_epoch), 0.0
        for step in range(steps):
            batch = collate(torch, [train[i] for i in shuffled[step * size: (step + 1) * size]],
                            kind, tokenizer.pad_token_id)
            loss_sum += train_step(torch, model, batch, optimizer, schedule)
        losses.append(loss_sum / max(steps, 1))
        train_seconds += time.perf_counter() - started
        started = time.perf_counter()
        model.eval()
        with torch.inference_mode():
            for split, (feats, _) in dev.items():
                predicted[split] = []
                for i in range(0, len(feats), spec["eval_batch_size"]):
                    chunk = feats[i: i + spec["eval_batch_size"]]
                    batch = collate(torch, chunk, kind, tokenizer.pad_token_id)
                    for key in ("labels", "start_positions", "end_positions"):
                        batch.pop(key, None)
                    predicted[split] += predictions(torch, kind, chunk, model(**batch), outside)
        eval_seconds += time.perf_counter() - started
        print(f"parity_hf: epoch {epoch + 1}: train loss {losses[-1]:.4f}", file=sys.stderr)
    with open(spec["output_file"], "w", encoding="utf-8") as f:
        json.dump({
            "framework": f"PyTorch {torch.__version__} + transformers {transformers.__version__}",
            "train_seconds": train_seconds, "eval_seconds": eval_seconds,
            "seconds_to_end": time.perf_counter() - START, "steps": total,
            "warmup_steps": warmup, "epoch_losses": losses, "threads": torch.get_num_threads(),
            "truncated_words": {"train": cut, **{s: c for s, (_, c) in dev.items()}},
            "predictions": predicted}, f)


if __name__ == "__main__":
    main(sys.argv[1])
