"""The one-line adapters on CPU with the real libraries and tiny models: a Lightning `Trainer`
and a Hugging Face `transformers.Trainer`, each recording every optimizer step, and a failing
Lightning step recorded with its traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from triage.store import ingest_spools, open_snapshot
from triage.trainer_hooks.config import MonitorConfig


def stored(data_dir: Path, job: str) -> tuple[list[tuple], list[tuple]]:
    ingest_spools(data_dir)
    with open_snapshot(data_dir) as snap:
        steps = snap.con.execute(
            "SELECT step, loss IS NOT NULL, grad_norm IS NOT NULL FROM steps WHERE job_id = ? ORDER BY step",
            [job],
        ).fetchall()
        events = snap.con.execute(
            "SELECT kind, detail FROM events WHERE job_id = ? ORDER BY time", [job]
        ).fetchall()
    return steps, events


def config(tmp_path: Path, job: str) -> MonitorConfig:
    return MonitorConfig(data_dir=tmp_path, job_id=job, canary_every=0, rank=0, world_size=1)


def lightning_module(fail_at: int | None = None):
    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def training_step(self, batch, batch_idx):
            if batch_idx == fail_at:
                raise KeyError("labels")
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=1e-2)

        def train_dataloader(self):
            data = torch.utils.data.TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
            return torch.utils.data.DataLoader(data, batch_size=4)

    return Tiny()


def lightning_trainer(tmp_path: Path, job: str, **kwargs):
    import lightning.pytorch as pl

    from triage.trainer_hooks.lightning_callback import TriageCallback

    return pl.Trainer(
        max_steps=6,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
        callbacks=[TriageCallback(config(tmp_path, job))],
        **kwargs,
    )


def test_lightning_callback_records_every_optimizer_step(tmp_path):
    lightning_trainer(tmp_path, "lit", gradient_clip_val=1.0).fit(lightning_module())
    steps, events = stored(tmp_path, "lit")
    assert steps == [(s, True, True) for s in range(1, 7)]
    kinds = [k for k, _ in events]
    assert kinds[0] == "process_start" and kinds[-1] == "exit"
    assert json.loads(events[0][1])["hooks"] == "explicit"  # steps are expected of it
    assert json.loads(events[-1][1]) == {"exit_code": 0}


def test_lightning_callback_records_a_failing_step_with_its_traceback(tmp_path):
    with pytest.raises(KeyError):
        lightning_trainer(tmp_path, "lit-fail").fit(lightning_module(fail_at=3))
    steps, events = stored(tmp_path, "lit-fail")
    assert [s for s, *_ in steps] == [1, 2, 3]
    [(_, detail)] = [e for e in events if e[0] == "exception"]
    assert "KeyError: 'labels'" in json.loads(detail)["traceback"]
    assert events[-1][0] == "exit"


def test_hf_trainer_callback_records_every_optimizer_step(tmp_path):
    from transformers import Trainer, TrainingArguments

    from triage.trainer_hooks.hf_callback import TriageTrainerCallback

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(8, 1)

        def forward(self, x, labels=None):
            out = self.layer(x)
            return {"loss": torch.nn.functional.mse_loss(out, labels), "logits": out}

    data = [{"x": torch.randn(8), "labels": torch.randn(1)} for _ in range(40)]
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=5,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        max_grad_norm=1.0,
        logging_strategy="no",
    )
    Trainer(
        model=Tiny(), args=args, train_dataset=data, callbacks=[TriageTrainerCallback(config(tmp_path, "hf"))]
    ).train()
    steps, events = stored(tmp_path, "hf")
    assert [(s, loss) for s, loss, _ in steps] == [(s, True) for s in range(1, 6)]
    assert [k for k, _ in events][-1] == "exit"
