"""The embedded demo job: a small causal transformer on synthetic sequences.

Nothing is downloaded. Each sequence follows ``x[t+1] = (a*x[t] + b) mod vocab`` with some
random tokens mixed in, so the loss falls quickly towards a floor above zero and a broken
gradient sync is visible as a curve that stalls. Every size it is given changes what the ranks
compute:

- TP > 1 splits attention heads and MLP columns with torch's tensor-parallel API;
- PP > 1 cuts the layers into stages (embedding on the first, head and loss on the last) run
  under a 1F1B schedule with ``--microbatches`` microbatches;
- CP > 1 splits every sequence into contiguous chunks; attention all-gathers K and V over the
  CP group with the causal mask and positions offset by the chunk's place;
- the remaining ranks are data-parallel replicas (DDP or FSDP2, gradients reduced over dp x cp),
  each taking its rows of one global batch drawn from one seed, so a layout does not change
  the data.

Each rank logs once what it holds (stage and layers, shard coordinates, parameter count) and
every rank logs the same per-step loss and gradient norm, those of the global batch and the
whole model, with the step time and global samples/s and tokens/s; the first record also
carries the whole model's FLOPs per token (6N + the attention term), for MFU. With
``--global-batch`` and the same seed, every layout gives the single process's losses up to float
rounding (tests/integration/test_parallel_equivalence.py). ``--checkpoint-every N`` saves the
model, optimizer, data position and RNG states with torch.distributed.checkpoint
(runtime.checkpoint), and ``--resume PATH`` (or ``EZPZ_RESUME_FROM`` from the launcher)
continues from one in any layout, the losses those of the run that was never stopped
(tests/integration/test_checkpoint_resume.py). With or without ``--checkpoint-every`` it
answers a request to save now (the walltime's, a relaunch's save-and-stop: then it ends after
that step, status 0). Run under any launcher, e.g.
``mpiexec -n 4 python -m runtime.examples.train --pp 2 --tp 2 --steps 20``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Any, NoReturn

import torch

import runtime
from runtime.checkpoint import Checkpointer, SaveAndStop, resume_target
from runtime.checkpoint_dirs import Checkpoint, CheckpointError
from runtime.dist import DistInfo, replica_mesh
from runtime.efficiency.flops import demo_flops_per_token
from runtime.examples.context import ContextShard
from runtime.examples.data import GlobalBatches
from runtime.examples.model import TinyLM, apply_tensor_parallel, local_numel
from runtime.examples.pipeline import (
    StepFn,
    autocast_for,
    pipeline_step,
    stage_layers,
    whole_step,
)
from runtime.examples.reduce import StepReducer, tp_shards
from runtime.examples.schedule import default_microbatches
from runtime.layout import MESH_ORDER

MAX_GRAD_NORM = 1.0


def lr_at(step: int, steps: int, peak: float) -> float:
    warmup = max(1, steps // 10)
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def check_groups(info: DistInfo, log: Any) -> None:
    """Prove every mesh dimension's group works with one all-reduce before training on it."""
    import torch.distributed as dist

    for dim in MESH_ORDER:
        ones = torch.ones(1, device=info.device)
        dist.all_reduce(ones, group=info.group(dim))
        if int(ones.item()) != info.size(dim):
            raise RuntimeError(f"{dim} group all-reduce gave {ones.item()}, want {info.size(dim)}")
    notes = [f"{d}={info.size(d)} (coord {info.coord(d)})" for d in MESH_ORDER]
    log.info("process groups ok: %s", ", ".join(notes))


def positive(text: str) -> int:
    """An argparse type, so that a zero size fails with one line, not a division by zero."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m runtime.examples.train", description=__doc__)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch-size", type=positive, default=8, help="sequences per replica per step")
    p.add_argument(
        "--global-batch",
        type=positive,
        default=None,
        help="sequences per step over all replicas, fixed whatever the layout (default: "
        "--batch-size x dp); each replica takes its share",
    )
    p.add_argument("--seq-len", type=positive, default=None, help="default: 64, a multiple of cp")
    p.add_argument("--vocab", type=positive, default=128)
    p.add_argument("--dim", type=positive, default=None, help="default: 16 per head")
    p.add_argument("--heads", type=positive, default=None, help="default: 4, a multiple of tp")
    p.add_argument("--layers", type=positive, default=None, help="default: 2, or pp when larger")
    p.add_argument(
        "--microbatches",
        type=positive,
        default=None,
        help="pipeline microbatches per step when pp > 1 (default: up to 2 per stage, "
        "dividing the replica's batch)",
    )
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--noise", type=float, default=0.1, help="fraction of random tokens")
    p.add_argument("--strategy", choices=("ddp", "fsdp", "none"), default="ddp")
    p.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    p.add_argument("--tp", type=int, default=None, help="default: EZPZ_TP from the launcher")
    p.add_argument("--pp", type=int, default=None, help="default: EZPZ_PP from the launcher")
    p.add_argument("--cp", type=int, default=None, help="default: EZPZ_CP from the launcher")
    p.add_argument("--seed", type=int, default=1337)
    p.add_argument("--sleep", type=float, default=0.0, help="extra seconds per step (demos)")
    p.add_argument("--log-every", type=int, default=1)
    p.add_argument(
        "--spike-at",
        type=int,
        default=None,
        metavar="STEP",
        help="record (and print) the loss of STEP times --spike-factor: a spike to find on "
        "the plot (demos, tests); training itself is unchanged",
    )
    p.add_argument("--spike-factor", type=float, default=10.0)
    p.add_argument(
        "--checkpoint-every",
        type=int,
        default=0,
        metavar="N",
        help="save a checkpoint to <run>/checkpoints/step-<N>/ every N steps (0: never)",
    )
    p.add_argument("--checkpoint-keep", type=positive, default=2, help="checkpoints kept")
    p.add_argument(
        "--checkpoint-sync",
        action="store_true",
        help="write checkpoints before the next step, not beside it",
    )
    p.add_argument(
        "--resume",
        default=None,
        metavar="PATH",
        help="continue from a checkpoint folder, or a run's newest checkpoint (default: "
        "EZPZ_RESUME_FROM from the launcher); any layout resumes any other's",
    )
    return p.parse_args(argv)


def resolve_layout(args: argparse.Namespace, info: DistInfo) -> str | None:
    """Fill in the defaults that depend on the sizes; a one-line reason when they cannot work."""
    tp, pp, cp, dp = (info.size(d) for d in ("tp", "pp", "cp", "dp"))
    # Defaults that fit any sizes, so whatever the launch form offers runs; they are the
    # classic ones (64 tokens, 4 heads of 16, 2 layers) wherever those already fit.
    if args.layers is None:
        args.layers = max(2, pp)
    if args.heads is None:
        args.heads = tp * math.ceil(4 / tp)
    if args.dim is None:
        args.dim = 16 * args.heads
    if args.seq_len is None:
        args.seq_len = cp * math.ceil(64 / cp)
    if args.global_batch is None:
        args.global_batch = args.batch_size * dp
    local_batch = args.global_batch // dp
    if pp > 1 and args.microbatches is None:
        args.microbatches = default_microbatches(pp, local_batch)
    problems = [
        (args.heads % tp, f"--heads {args.heads} must be divisible by tp={tp}"),
        (args.dim % args.heads, f"--dim {args.dim} must be divisible by --heads {args.heads}"),
        (args.seq_len % cp, f"--seq-len {args.seq_len} must be divisible by cp={cp}"),
        (
            args.global_batch < dp or args.global_batch % dp,
            f"--global-batch {args.global_batch} must be a positive multiple of dp={dp}",
        ),
        (args.layers < pp, f"--layers {args.layers} must be at least pp={pp}, one per stage"),
    ]
    if pp > 1:
        problems += [
            (
                args.microbatches is None,
                f"no microbatch count from pp={pp} to {2 * pp} divides the replica's batch of "
                f"{local_batch}: pass --microbatches, or a larger --batch-size",
            ),
            (
                args.microbatches is not None
                and (args.microbatches < pp or local_batch % args.microbatches),
                f"--microbatches {args.microbatches} must be at least pp={pp} and divide the "
                f"replica's batch of {local_batch}",
            ),
        ]
    return next((message for bad, message in problems if bad), None)


def holdings(args: argparse.Namespace, info: DistInfo, layers: range, params: int) -> str:
    """One line that shows the split: stage and layers, shard coordinates, data slice."""
    pp = info.size("pp")
    parts = [f"stage {info.coord('pp')}/{pp} layers {layers.start}-{layers.stop - 1}"]
    if info.coord("pp") == 0:
        parts[0] += " +embedding"
    if info.coord("pp") == pp - 1:
        parts[0] += " +head"
    coords = " ".join(f"{d}={info.coord(d)}/{info.size(d)}" for d in ("tp", "cp", "dp"))
    rows, columns = data_slice(args, info)
    parts.append(
        f"shard {coords} tokens {columns.start}-{columns.stop - 1} of {args.seq_len} "
        f"rows {rows.start}-{rows.stop - 1} of {args.global_batch}"
    )
    parts.append(f"params={params}")
    return "holds " + " | ".join(parts)


def data_slice(args: argparse.Namespace, info: DistInfo) -> tuple[slice, slice]:
    """This rank's rows (its DP replica's share) and columns (its CP chunk) of the batch."""
    rows = args.global_batch // info.size("dp")
    chunk = args.seq_len // info.size("cp")
    dp, cp = info.coord("dp"), info.coord("cp")
    return slice(dp * rows, (dp + 1) * rows), slice(cp * chunk, (cp + 1) * chunk)


def train(args: argparse.Namespace) -> dict[str, dict[str, float]]:
    """Set up, train, and tear down once every tensor of the run has been released."""
    log = runtime.get_logger("ezpz.train", all_ranks=True)
    try:  # before any process group: a bad path ends every rank at once, the same way
        resume = resume_target(args.resume)
    except CheckpointError as exc:
        _refuse(exc, runtime.get_rank(), log)
    info = runtime.setup(args.tp, args.pp, args.cp, seed=args.seed)
    log.info("%s", info.describe())
    for key, reason in info.reasons.items():
        log.info("%s: %s", key, reason)
    problem = resolve_layout(args, info)
    if problem:
        raise SystemExit(problem)
    if info.mesh is not None and info.backend != "fake":  # a fake group's sums prove nothing
        check_groups(info, log)
    try:  # its model, optimizer and tensors die on return
        summary = _train_loop(args, info, log, resume)
    except CheckpointError as exc:
        _refuse(exc, info.rank, log)
    if "loss" in summary:
        log.info("loss mean=%.4f last=%.4f", summary["loss"]["mean"], summary["loss"]["last"])
    runtime.cleanup()
    return summary


def _refuse(exc: CheckpointError, rank: int, log: Any) -> NoReturn:
    """One line on rank 0's stderr (every rank meets the same error), the same in each other
    rank's log (the first rank to exit is the one whose log ``why`` quotes, and its peers are
    killed after it, rank 0 maybe before it printed), and exit status 2."""
    if rank == 0:  # one write: print's text and newline apart let a peer's line in between
        sys.stderr.write(f"error: {exc}\n")
        sys.stderr.flush()
    else:
        log.error("%s", exc)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # no barrier: every rank is here, or dies like this one
    raise SystemExit(2)


def build(args: argparse.Namespace, info: DistInfo, log: Any) -> tuple[Any, StepFn, StepReducer]:
    """This rank's part of the model, wrapped, with the step that runs it and its reducer."""
    pp, stage = info.size("pp"), info.coord("pp")
    cp = None
    if info.size("cp") > 1:
        cp = ContextShard(info.group("cp"), info.coord("cp"), info.size("cp"), args.seq_len)
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    model = TinyLM(args.vocab, args.dim, args.heads, args.layers, args.seq_len, cp)
    layers = stage_layers(args.layers, stage, pp)
    model.keep_stage(layers, first=stage == 0, last=stage == pp - 1)
    model = model.to(info.device)
    if info.size("tp") > 1:
        apply_tensor_parallel(model, info)
    pieces = tp_shards(list(model.parameters()))
    dtype = getattr(torch, args.dtype)
    fsdp = args.strategy == "fsdp"
    wrapped = runtime.wrap_model(
        model,
        info,
        args.strategy,
        param_dtype=dtype if fsdp else None,
        reduce_dtype=torch.float32 if fsdp else None,
        shard_modules=model.held_blocks(),
        replicas=replica_mesh(info, ("dp", "cp")),
    )
    log.info("%s", holdings(args, info, layers, local_numel(wrapped)))
    autocast = autocast_for(info.device, dtype, args.dtype != "float32" and not fsdp)
    if pp == 1:
        step = whole_step(wrapped, args.vocab, autocast)
    else:
        rows, columns = data_slice(args, info)
        step = pipeline_step(
            wrapped,
            info,
            microbatches=args.microbatches,
            local_shape=(rows.stop - rows.start, columns.stop - columns.start),
            dim=args.dim,
            vocab=args.vocab,
            hidden_dtype=dtype if fsdp else torch.float32,  # autocast keeps the residual fp32
            logits_dtype=dtype,
            autocast=autocast,
        )
    params = list(wrapped.parameters())
    return wrapped, step, StepReducer(params, pieces, info)


def _train_loop(
    args: argparse.Namespace, info: DistInfo, log: Any, resume: Checkpoint | None
) -> dict[str, dict[str, float]]:
    model, step_fn, reduce = build(args, info, log)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    batches = GlobalBatches(args.seed, args.global_batch, args.seq_len, args.vocab, args.noise)
    rows, columns = data_slice(args, info)
    flops = demo_flops_per_token(args.vocab, args.dim, args.heads, args.layers, args.seq_len)
    history = runtime.History(memory=True, flops_per_token=flops)
    log.info("metrics -> %s", history.path)
    # Always made, saving or not: a relaunch's request to save now and stop is answered, so
    # the run that replaces this one continues at the step it stopped at.
    sizes = {d: info.size(d) for d in MESH_ORDER}
    ckpt = Checkpointer(
        model,
        opt,
        history.run_dir,
        data=batches,
        every=args.checkpoint_every,
        keep=args.checkpoint_keep,
        async_save=not args.checkpoint_sync,
        describe={"sizes": sizes, "strategy": args.strategy},
    )
    start = 0
    if resume is not None:
        start = ckpt.load(resume)
        log.info("resumed at step %d from %s", start, resume.path)
    samples, tokens = args.global_batch, args.global_batch * args.seq_len
    for step in range(start, args.steps):
        t0 = time.perf_counter()
        x, y = batches.next(rows, columns)
        x, y = x.to(info.device), y.to(info.device)
        lr = lr_at(step, args.steps, args.lr)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.zero_grad(set_to_none=True)
        loss, grad_norm = reduce(step_fn(x, y), MAX_GRAD_NORM)
        opt.step()
        if args.sleep:
            time.sleep(args.sleep)
        stopping = None
        try:
            ckpt.step_done(step + 1)  # the step pays for copying a checkpoint, not writing it
        except SaveAndStop as asked:  # saved: the run ends after this step's record
            stopping = asked
        dt = time.perf_counter() - t0
        if step == args.spike_at:
            loss *= args.spike_factor
        metrics = {"loss": loss, "lr": lr, "grad_norm": grad_norm, "dt": dt}
        metrics.update(ckpt.metrics())
        history.record(step, metrics, tokens=tokens, samples=samples)
        if step % args.log_every == 0 or step == args.steps - 1:
            log.info(
                "step %d/%d loss=%.4f lr=%.2e dt=%.1fms tok/s=%.0f",
                step,
                args.steps,
                loss,
                lr,
                dt * 1e3,
                tokens / dt,
            )
        if stopping is not None:
            history.close()
            raise stopping
    ckpt.close()
    history.close()
    return history.summary()


def main(argv: list[str] | None = None) -> int:
    train(parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
