"""An SVG screenshot of ``rooflinectl explore`` after some keys: ``python benchmarks/explore_screenshot.py``.

Example (the one in docs/explore.md): python benchmarks/explore_screenshot.py docs/img/explore-decode.svg
--keys bbbbbb  (decode of Llama 3 8B on an H100, batch doubled six times to 64).
"""

from __future__ import annotations

import argparse
import asyncio


async def shoot(path: str, workload: str, gpu: str, keys: str, size: tuple[int, int], title: str) -> None:
    from rooflinectl.explore.app import ExploreApp
    from rooflinectl.specs.hardware import load_gpu
    from rooflinectl.specs.scenario import resolve_workload

    app = ExploreApp(resolve_workload(workload), load_gpu(gpu))
    async with app.run_test(size=size) as pilot:
        for key in keys:
            await pilot.press(key)
        await pilot.pause()
        with open(path, "w", encoding="utf-8") as f:
            f.write(app.export_screenshot(title=title))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", help="the SVG file to write")
    parser.add_argument("--workload", default="decode")
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--keys", default="", help="keys to press first, e.g. bbbbbb")
    parser.add_argument("--size", default="100x30", help="columns x rows (default 100x30)")
    args = parser.parse_args()
    cols, rows = (int(n) for n in args.size.split("x"))
    title = f"rooflinectl explore {args.workload} --gpu {args.gpu}" + (f"  (keys: {args.keys})" if args.keys else "")
    asyncio.run(shoot(args.path, args.workload, args.gpu, args.keys, (cols, rows), title))
    print(f"wrote {args.path}")


if __name__ == "__main__":
    main()
