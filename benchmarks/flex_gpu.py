"""FlexAttention on CUDA: TISA's table-gathering score_mod against no score_mod.

    python benchmarks/flex_gpu.py            # needs a CUDA device

Forward+backward time of compiled FlexAttention with the RBF bias table (the scorer is
evaluated on the 2L-1 offsets each step, as in training) as a ratio against compiled
FlexAttention without score_mod, both measured in this process with CUDA events.
Target: the ratio of throughputs (no score_mod time / TISA time) >= 0.85.
"""

import statistics
import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("benchmarks/flex_gpu.py needs a CUDA device")
        return 1
    from torch.nn.attention.flex_attention import flex_attention

    from tisa import scoring
    from tisa.attention import attention

    plain = torch.compile(flex_attention)
    b, h, d = 8, 12, 64
    print(f"B={b}, H={h}, D={d}, bf16, {torch.cuda.get_device_name()}")
    print("| L | flex, no score_mod (ms) | flex + TISA rbf (ms) | throughput ratio |")
    print("|---:|---:|---:|---:|")
    for length in (512, 2048, 8192):
        q, k, v = (
            torch.randn(b, h, length, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        scorer = scoring.build("rbf", num_heads=h).cuda()

        def base():
            plain(q, k, v).sum().backward()

        def tisa():
            attention(q, k, v, scorer, backend="flex").sum().backward()

        times = {"base": [], "tisa": []}
        for fn in (base, tisa):
            for _ in range(3):
                fn()
        torch.cuda.synchronize()
        for _ in range(20):
            for name, fn in (("base", base), ("tisa", tisa)):
                start, end = torch.cuda.Event(True), torch.cuda.Event(True)
                start.record()
                fn()
                end.record()
                torch.cuda.synchronize()
                times[name].append(start.elapsed_time(end))
        tb, tt = statistics.median(times["base"]), statistics.median(times["tisa"])
        print(f"| {length} | {tb:.2f} | {tt:.2f} | {tb / tt:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
