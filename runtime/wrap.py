"""Wrap a model for data parallelism: nothing, DDP, or FSDP2 (``fully_shard``).

Tensor parallelism is the model's business (it knows which layers split how) and is applied
before this; data parallelism then runs over the replica mesh, the ranks that hold the same TP
shard. That is the composition torch supports: FSDP2 over a DTensor model on a 2-D mesh, or DDP
after the TP module transform.
"""

from __future__ import annotations

from typing import Any

from runtime.dist import DistInfo, replica_mesh

STRATEGIES = ("ddp", "fsdp", "none")


def wrap_model(
    model: Any,
    info: DistInfo,
    strategy: str = "ddp",
    *,
    param_dtype: Any = None,
    reduce_dtype: Any = None,
    shard_modules: list[Any] | None = None,
    replicas: Any = None,
) -> Any:
    """Return the model ready for training on ``info.device``.

    ``param_dtype``/``reduce_dtype`` form FSDP2's mixed-precision policy (e.g. bf16 compute with
    fp32 gradient reduction). ``shard_modules`` are the blocks FSDP2 shards one by one so that
    only one block's full parameters live at a time; the root is always sharded last.
    ``replicas`` is the mesh gradients are reduced over, by default :func:`replica_mesh`'s.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(STRATEGIES)}, not {strategy!r}")
    model = model.to(info.device)
    replicas = replica_mesh(info) if replicas is None else replicas
    if strategy == "none" or replicas is None or replicas.size() == 1:
        return model
    if strategy == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        if info.sizes["tp"] > 1:
            from torch.distributed.tensor.parallel.ddp import _pre_dp_module_transform

            _pre_dp_module_transform(model)
        device_ids = [info.device.index] if info.device.type in ("cuda", "xpu") else None
        return DDP(model, device_ids=device_ids, process_group=replicas.get_group())
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    for block in shard_modules or []:
        fully_shard(block, mesh=replicas, mp_policy=policy)
    return fully_shard(model, mesh=replicas, mp_policy=policy)
