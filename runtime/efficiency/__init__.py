"""How much of the hardware a run uses: model FLOPs per token, peak FLOP/s per device, MFU.

Standard library only, except :mod:`runtime.efficiency.matmul` (the CPU probe's measurement,
run in its own interpreter) and :func:`runtime.efficiency.hardware.hardware_flops_per_token`
(torch's flop counter, in the rank that asks for it).
"""
