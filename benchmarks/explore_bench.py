"""How long one key takes to reach the screen in ``rooflinectl explore``: ``python benchmarks/explore_bench.py``.

Runs the app headless at 100×30 (Textual's test pilot), presses each knob's key in turn, and reports two figures
per key: the update (the engine's analysis, the verdict, the chart drawn, every panel given its new content), and
key → painted frame: the update plus Textual's layout and rendering of the whole screen, to the first frame that
shows the new numbers and to the last frame the key caused (a second frame follows when a scroll bar of the
verdict or op panel changes); only the write to a real terminal is left out. A measurement, not a test: nothing is asserted.
It wraps ``App._display``, a private Textual method, to timestamp frames.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

KEYS = ("b", "B", "c", "C", "p", "a", "d", "m", "g", "down")


async def measure(rounds: int, size: tuple[int, int]) -> tuple[list[float], list[float], list[float]]:
    from rooflinectl.explore.app import ExploreApp
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    app = ExploreApp(resolve_workload("decode"), load_gpu("h100"))
    frames: list[float] = []
    display = app._display

    def timed_display(screen, renderable):
        frames.append(time.perf_counter())
        return display(screen, renderable)

    app._display = timed_display  # type: ignore[method-assign]  # count the frames the app paints
    first: list[float] = []
    last: list[float] = []
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.update_seconds.clear()
        for _ in range(rounds):
            for key in KEYS:
                frames.clear()
                start = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                if frames:
                    first.append(frames[0] - start)
                    last.append(frames[-1] - start)
    return list(app.update_seconds), first, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="times through the keys (default 5)")
    args = parser.parse_args()
    updates, first, last = asyncio.run(measure(args.rounds, (100, 30)))
    for name, values in (("update", updates), ("key -> first frame", first), ("key -> last frame", last)):
        ms = sorted(v * 1e3 for v in values)
        p90 = ms[int(0.9 * (len(ms) - 1))]
        print(f"{name:19s} n={len(ms):3d}  median {statistics.median(ms):5.1f} ms  p90 {p90:5.1f} ms  "
              f"max {ms[-1]:5.1f} ms")


if __name__ == "__main__":
    main()
