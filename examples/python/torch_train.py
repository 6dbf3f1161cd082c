"""Train a tiny PyTorch model on a Sluice pipeline, checkpointing the input position.

    python examples/python/torch_train.py [DATA_GLOB] [--epochs N] [--state PATH]

Reads the image fixtures by default. Sluice decodes, crops, flips and batches on its own
threads with the GIL released; the DataLoader only hands batches over (num_workers=0,
batch_size=None). The input position is saved with the model (``ds.state_dict()``) every
few steps, so a run stopped with Ctrl-C continues where it stopped when started again with
the same --state file.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

import sluice
import sluice.torch

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "tests", "fixtures", "tfrecord", "images.tfrecord-*")


def pipeline(files: str) -> sluice.Pipeline:
    return (
        sluice.tfrecord(files, shuffle_files=True)
        .interleave(cycle_length=4, num_parallel="auto")
        .shuffle(64)
        .parse_example({"image": "string", "label": "int64"})
        .image_ops(
            [
                {"op": "decode", "channels": 3},
                {"op": "random_crop", "height": 24, "width": 24},
                {"op": "random_flip_left_right"},
                {"op": "normalize", "mean": [127.5] * 3, "std": [127.5] * 3},
                {"op": "to_chw"},
            ],
            num_parallel="auto",
        )
        .batch(8, drop_remainder=True)
        .prefetch()
        .options(seed=0)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="?", default=FIXTURES)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--state", default=None, help="save/restore model + input position here")
    args = parser.parse_args()

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 24 * 24, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = sluice.torch.IterableDataset(pipeline(args.files))
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=0)

    start_epoch = 0
    if args.state and os.path.exists(args.state):
        saved = torch.load(args.state, weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        ds.load_state_dict(saved["input"])
        start_epoch = saved["epoch"]
        print(f"resumed in epoch {start_epoch}", file=sys.stderr)

    for epoch in range(start_epoch, args.epochs):
        ds.set_epoch(epoch)
        total, steps = 0.0, 0
        for step, batch in enumerate(loader):
            loss = torch.nn.functional.cross_entropy(model(batch["image"]), batch["label"])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
            steps += 1
            if args.state and step % 2 == 1:
                torch.save(
                    {
                        "model": model.state_dict(),
                        "optimizer": optimizer.state_dict(),
                        "input": ds.state_dict(),
                        "epoch": epoch,
                    },
                    args.state,
                )
        print(f"epoch {epoch}: {steps} steps, mean loss {total / max(steps, 1):.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
