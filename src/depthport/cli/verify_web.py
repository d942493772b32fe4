"""The web half of `depthport verify DIR`: a web folder's page in headless Chromium against the upstream model,
written as report.json, report.html (with the page's screenshot) and screenshot.png."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ..errors import InputError
from ..scratch import process_folder


def parse_backends(text: str) -> tuple[str, ...]:
    from ..verify.web_folder import BACKENDS

    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise InputError(f"unknown --backends {', '.join(unknown) or '(none)'}; known: {', '.join(BACKENDS)}")
    return names


def measure(args, folder: Path, config: dict):
    """(built, refs, source, WebResult, prompt origins) for one web folder; a prompted model's page gets each
    image's prompt (``core.prompts.prompt_set``)."""
    from ..build import build
    from ..core.images import image_set
    from ..core.prompts import prompt_set
    from .common import check_prompt_input, images_note, loosened_note, status_console
    from ..registry import get_spec
    from ..verify.stage import make_references
    from ..verify.web_folder import WebJob, verify_folder

    backends = parse_backends(args.backends)
    spec = get_spec(args.reference or config["model"])
    hw = tuple(config["input_shape"][2:])
    prompt_hw = tuple(config["prompt_shape"][2:]) if config.get("prompt_shape") else None
    check_prompt_input(spec, f"the page in {folder} {'feeds a prompt' if prompt_hw else 'feeds one image'}",
                       bool(prompt_hw))
    source, images = image_set(args.images)
    if args.images:
        images_note(status_console(), args.images)
    loosened_note(status_console(), args.gate, spec.metric)
    prompts, origins = prompt_set(args.images, [n for n, _ in images], prompt_hw) if prompt_hw else (None, None)
    built = build(spec, hw, args.weights or config["weights"], rewrites=config.get("rewrites"),
                  pos_formula=config.get("pos_embed_formula"), prompt_hw=prompt_hw)
    try:
        refs = make_references(spec, built.weights, hw, None if args.no_eager else built.model, config["normalize"],
                               images, args.threads, fp64=not args.no_fp64, cache=not args.no_cache, prompts=prompts)
    except ModuleNotFoundError as exc:
        from ..errors import MissingDependency

        raise MissingDependency(exc.name or "?", f"the upstream reference of {spec.id}") from None
    with tempfile.TemporaryDirectory(prefix="web-", dir=process_folder()) as scratch:
        try:
            result = verify_folder(WebJob(folder, refs, built, Path(scratch), args.threads, args.fast_shaders,
                                          backends, config))
        except RuntimeError as exc:
            raise InputError(f"the page in {folder} failed in Chromium: {exc}") from None
    return built, refs, source, result, origins


def run_web(args, paths: list[Path]) -> int:
    from ..atomic import write_bytes
    from ..core.schema import SHIPPED, UNVERIFIED, ArtifactJson, BrowserJson, ReportJson, skipped_only, write_report
    from ..outdir import require_verify_folder
    from ..quiet import native_stderr_muted
    from ..report.header import new_report
    from ..report.html import write_html
    from ..verify import gates, web_folder
    from ..verify.stage import figures_entry, summary_block
    from ..web.folder import folder_bytes, read_config
    from .common import console

    if len(paths) != 1:
        raise InputError("give one web folder, or model files: not both, not several folders")
    folder = paths[0]
    config = read_config(folder)
    out = Path(args.out) if args.out else folder.parent / f"verify-{folder.name}"
    require_verify_folder(out)
    with console(stderr=True).status(f"verifying {folder} in headless Chromium"), native_stderr_muted(not args.verbose):
        built, refs, source, result, prompt_origins = measure(args, folder, config)
    target = "web" if config["runtime"] == "litert.js" else "web-onnx"
    art = ArtifactJson({})
    art.update(file=str(folder), target=target, precision="fp32", bytes=folder_bytes(folder),
               input_shape=config["input_shape"], runtime=f"{config['runtime']} {config['runtime_version']}",
               web={"runtime": config["runtime"], "model_file": config["model_file"]})
    web_folder.record(art, result)
    thresholds = gates.thresholds(args.gate, built.spec.metric)
    report = ReportJson(new_report(built.spec, built, args.command_line,
                                   verify=summary_block(refs, source, args.threads, built.weights.random,
                                                        prompt_origins)))
    report.add(art)
    gates.apply_gates(report, None, thresholds)
    out.mkdir(parents=True, exist_ok=True)
    figures = figures_entry(refs, refs.names[0])
    if result.depth is not None:
        figures["variants"][f"{target} (Chromium, WASM)"] = result.depth
    if result.screenshot:
        write_bytes(out / "screenshot.png", result.screenshot)
        BrowserJson(art.browser).screenshot = "screenshot.png"
        figures["screenshots"] = {target: result.screenshot}
    write_report(out, report)
    write_html(out / "report.html", report.data, figures)
    print_web(report.data, out)
    return 0 if art.status == SHIPPED or (art.status == UNVERIFIED and skipped_only(art)) else 1


def print_web(data: dict, out: Path) -> None:
    """One row per backend: where it ran, its figures, its time and verdict (``report.web``'s rows)."""
    from rich.table import Table

    from ..core.report_model import load_report
    from ..report.web import CHECKS, backend_row
    from .common import console

    con = console()
    report = load_report(data)
    art = report.artifacts[0]
    if report.random_weights:
        con.print("[bold red]RANDOM WEIGHTS: reference and page are random; parity tests the conversion only.[/]")
    table = Table(title=f"{art.file} in {art.browser.browser if art.browser else 'Chromium'}")
    for col in ("backend", "shape", "vs reference rel L2", "vs CPU rel L2", "ms (first / median)", "verdict"):
        table.add_column(col, overflow="fold")
    for name, check in CHECKS.items():
        verdict = art.verdict(check)
        row = backend_row(art, name)
        table.add_row(name, row["shape"], row["rel_l2"], row["vs_cpu"], f"{row['first_ms']} / {row['median_ms']}",
                      "-" if verdict is None else verdict.text())
    con.print(table)
    con.print(f"{art.status}: {art.status_reason}")
    con.print(f"wrote {out / 'report.json'}, {out / 'report.html'} and the page's screenshot")
