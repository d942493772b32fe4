"""Prompt Depth Anything: the architecture against transformers' reference, its exact rewrites, and the export
pipeline with a second input: the LiteRT file (named inputs, GPU rules statically and on the accelerator),
verification with prompts, `predict --prompt`, and every bad prompt refused in one line."""

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from depthport.build import build
from depthport.cli import main
from depthport.models.layers import Resize
from depthport.registry import MODELS, get_spec, tiny_spec

from helpers import browser_or_skip, rel_l2, vulkan_or_skip

ASSET = "src/depthport/assets/chelsea.jpg"
SPEC = get_spec("prompt-da-tiny")
HW = (56, 70)


def inputs(hw, prompt_hw, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, 3, *hw, generator=g), 0.5 + 3.0 * torch.rand(1, 1, *prompt_hw, generator=g)


@pytest.fixture(scope="module")
def weights():
    return build(SPEC, HW, "random", rewrites=[]).weights


@pytest.fixture(scope="module")
def reference(weights):
    return SPEC.arch.reference(SPEC, weights)


@pytest.mark.parametrize("hw, prompt_hw", [(HW, (192, 256)), ((70, 56), (256, 192)), ((42, 98), (24, 32))])
def test_reference_and_export_forms_match_transformers(weights, reference, hw, prompt_hw):
    """Landscape ARKit prompt, portrait, and a prompt finer than the coarsest map: within 1e-5 rel. L2."""
    x, p = inputs(hw, prompt_hw)
    want = reference(x, p)
    for rewrites in ([], None):
        model = build(SPEC, hw, weights, rewrites=rewrites, prompt_hw=prompt_hw).model
        with torch.no_grad():
            assert rel_l2(model(x, p), want) <= 1e-5


def test_depth_is_in_metres_within_the_prompt_range_and_follows_the_prompt(weights):
    model = build(SPEC, HW, weights).model
    x, p = inputs(HW, (192, 256))
    with torch.no_grad():
        depth = model(x, p)
        scaled = model(x, 2.0 * p)  # a prompt twice as far: the same normalised prompt, depth twice as far
        flipped = model(x, p.flip(-1))  # the same range, another layout: another depth map
    assert float(p.min()) <= float(depth.min()) and float(depth.max()) <= float(p.max())
    assert float(depth.std()) > 0.05
    assert rel_l2(scaled, 2.0 * depth) <= 1e-5 and rel_l2(flipped, depth) > 1e-3


def test_prompt_range_by_pooling_is_exact_and_the_pte_form_uses_it(weights):
    """ExecuTorch's form takes the prompt's min and max by max pooling (XNNPACK runs it; its min/max reductions
    are left on portable kernels): the same values, bit for bit; the form's depth as the model's (its other changes
    reassociate float32 sums)."""
    from depthport.export.executorch import FORMS, backend_form
    from depthport.models.prompt_depth_anything import normalise_prompt

    x, p = inputs(HW, (192, 256), seed=11)
    for plain, pooled in zip(normalise_prompt(p), normalise_prompt(p, pooled=True)):
        assert torch.equal(plain, pooled)
    model = build(SPEC, HW, weights).model
    form, changes = backend_form(model, **FORMS["fp32"])
    assert form.range_by_pooling and not model.range_by_pooling and any("max pooling" in c for c in changes)
    with torch.no_grad():
        assert rel_l2(form(x, p), model(x, p)) < 1e-6


def test_prompt_resize_matrices_are_align_corners_false_bilinear():
    x = torch.randn(1, 1, 192, 256, generator=torch.Generator().manual_seed(0))
    for out_hw in ((5, 6), (14, 18), (112, 140)):
        exact = Resize((192, 256), out_hw, "exact", chunks=4, align_corners=False)
        want = torch.nn.functional.interpolate(x, size=out_hw, mode="bilinear", align_corners=False)
        assert rel_l2(exact(x), want) <= 1e-6


def test_registry_ids_licences_and_defaults():
    ids = ("prompt-da-small", "prompt-da-large", "prompt-da-small-transparent")
    for model_id in ids:
        spec = MODELS[model_id]
        assert spec.prompted and spec.prompt_hw == (192, 256) and spec.default_hw == (756, 1008)
        assert spec.licence == "Apache-2.0" and spec.hf_repo in spec.licence_note
        assert spec.units()["unit"] == "m" and "prompt" in spec.units()["line"]
        assert tiny_spec(spec).id == "prompt-da-tiny" and not MODELS[model_id].hidden
    assert MODELS["prompt-da-large"].model_config.vit.dim == 1024
    assert MODELS["prompt-da-small"].hf_repo == "depth-anything/prompt-depth-anything-vits-hf"


def test_transformers_checkpoint_loads_and_a_da2_one_is_refused(weights, reference, tmp_path):
    from depthport.weights import WeightsError

    reference.model.save_pretrained(tmp_path / "prompt")
    loaded = build(SPEC, HW, str(tmp_path / "prompt"), rewrites=[])
    assert all(torch.equal(loaded.weights.state[k], v) for k, v in weights.state.items())
    da2 = get_spec("da2-tiny").arch.reference(get_spec("da2-tiny"), build("da2-tiny", HW).weights)
    da2.model.save_pretrained(tmp_path / "da2")
    with pytest.raises(WeightsError, match="depth_anything checkpoint .* prompt-da-tiny takes a prompt depth"):
        build(SPEC, HW, str(tmp_path / "da2"))
    with pytest.raises(WeightsError, match="prompt_depth_anything checkpoint .* da2-tiny does not take"):
        build("da2-tiny", HW, str(tmp_path / "prompt"))


# ------------------------------------------------------------------------------------------------------ the pipeline
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`depthport export prompt-da-tiny` end to end: ledger, LiteRT FP32 and INT8, the fp16 .pte, static and dynamic
    ONNX, check, verify with prompts, bench, card."""
    out = tmp_path_factory.mktemp("prompt-export") / "out"
    assert main(["export", "prompt-da-tiny", "--targets", "litert-fp32,litert-int8,xnnpack-fp16,onnx,onnx-dynamic",
                 "--out", str(out)]) == 0
    return out, json.loads((out / "report.json").read_text())


def test_export_verifies_with_prompts_and_ships(exported):
    out, report = exported
    arts = {a["target"]: a for a in report["artifacts"]}
    art, onnx_art = arts["litert-fp32"], arts["onnx"]
    for each in (art, onnx_art):
        assert each["status"] == "shipped" and each["checks"]["parity"]["state"] == "pass"
        assert each["parity"]["rel_l2_pooled"] <= 1e-5 and each["parity"]["fp64_error_ratio"] < 2
    assert art["checks"]["gpu_static"]["state"] == "pass" and art["checks"]["fp16_compute"]["state"] == "pass"
    assert report["prompt_shape"] == [1, 1, 192, 256] and report["output_units"]["unit"] == "m"
    from depthport.runtimes import load_runner

    assert load_runner(out / onnx_art["file"]).extra_shapes == ((1, 1, 192, 256),)
    card = (out / "README.md").read_text()
    assert "inp[1].write(prompt)" in card and "prompt_input: prompt" in card and "0x1FFF" in card
    assert "frame.sceneDepth!.depthMap" in card and "module.forward(input, prompt)" in card  # the Swift snippet
    prompts = report["verify"]["prompts"]
    assert prompts["motorcycle_left"] == "simulated LiDAR of the ground truth" and len(prompts) == 6
    assert art["accuracy"]["metric"] and art["accuracy"]["to_metres"] == 1.0
    assert all(step["exact"] and step["rel_l2_step"] < 1e-5 for step in report["rewrite_ledger"])
    assert art["latency_ms"]["median"] > 0


def test_accuracy_is_compared_with_the_model_without_prompt_and_the_prompt_alone(exported):
    """The scene's simulated LiDAR prompt alone, upsampled, is scored in metres (it is the ground truth downsampled
    with 1 % noise: close to it); the upstream model without a prompt gives depth with no unit, scored aligned."""
    out, report = exported
    acc = report["accuracy"]
    alone, without = acc["baselines"]["prompt_alone"], acc["baselines"]["without_prompt"]
    assert alone["metric"] and alone["to_metres"] == 1.0 and alone["abs_rel"] < 0.05 and alone["delta1"] > 0.95
    assert not without["metric"] and without["space"] == "depth" and np.isfinite(without["abs_rel"])
    assert without["abs_rel"] != acc["reference"]["abs_rel"]
    html = (out / "report.html").read_text()
    assert html.count("baseline: ") == 2 and "LiDAR prompt alone" in html


def test_int8_and_fp16_files_take_the_prompt_and_are_gated_in_metres(exported, weights):
    """The fp16 .pte (image and prompt cast to fp16 inside, the head in FP32 behind casts) and the LiteRT INT8 file
    feed the prompt; both are gated on the depth map and on the worst image's mean absolute error in metres, as
    metric models are."""
    from depthport.runtimes import load_runner

    out, report = exported
    arts = {a["target"]: a for a in report["artifacts"]}
    pte, int8 = arts["xnnpack-fp16"], arts["litert-int8"]
    x, p = inputs(HW, (192, 256), seed=5)
    with torch.no_grad():
        eager = build(SPEC, HW, weights).model(x, p).numpy()
    for art, tol in ((pte, 2e-2), (int8, 1e-1)):
        runner = load_runner(out / art["file"])
        assert runner.extra_shapes == ((1, 1, 192, 256),)
        assert float(rel_l2(torch.from_numpy(np.asarray(runner.run(x.numpy(), p.numpy()))), torch.from_numpy(eager))) < tol
        assert art["checks"]["parity"]["state"] == "pass" and art["status"] == "shipped"
        assert art["parity"]["mean_abs_worst"] <= art["checks"]["parity"]["thresholds"]["mean_abs_worst"]
    assert pte["delegation"]["subgraphs"] == 2 and pte["checks"]["delegation"]["state"] == "pass"  # the FP32 head
    assert pte["checks"]["fp16_arithmetic"]["state"] == "pass"


def test_dynamic_onnx_takes_any_image_and_prompt_shape(exported, weights, tmp_path):
    """onnx-dynamic of a prompted model: image H x W (multiples of 14) and prompt h x w free, verified at three image
    shapes by the export, and equal to the model built at each shape here, with prompts of other shapes too."""
    from depthport.runtimes import load_runner

    out, report = exported
    art = {a["target"]: a for a in report["artifacts"]}["onnx-dynamic"]
    assert art["status"] == "shipped" and art["checks"]["parity_shapes"]["state"] == "pass"
    assert sorted(art["shapes_parity"]) == ["42x84", "56x56"]
    runner = load_runner(out / art["file"])
    assert runner.dynamic and runner.input_shape == (1, 3, *HW) and runner.extra_shapes == ((1, 1, 192, 256),)
    for hw, prompt_hw in (((42, 84), (120, 160)), ((56, 56), (192, 256)), (HW, (48, 64))):
        x, p = inputs(hw, prompt_hw, seed=7)
        with torch.no_grad():
            eager = build(SPEC, hw, weights, prompt_hw=prompt_hw).model(x, p)
        assert rel_l2(torch.from_numpy(runner.run(x.numpy(), p.numpy())), eager) <= 1e-5
    tof = save_prompt_png(tmp_path / "tof.png", (120, 160))  # predict takes a prompt of any shape for this file
    assert main(["predict", str(out / art["file"]), ASSET, "-o", str(tmp_path / "d.png"), "--prompt", str(tof)]) == 0


def test_litert_file_has_named_inputs_passes_the_gpu_rules_and_matches_eager(exported, weights):
    from ai_edge_litert.interpreter import Interpreter

    from depthport.check.static import check_static, has_errors

    path = exported[0] / "prompt_da_tiny_fp32.tflite"
    interpreter = Interpreter(str(path))
    assert interpreter.get_signature_list()["serving_default"]["inputs"] == ["image", "prompt"]
    x, p = inputs(HW, (192, 256), seed=3)
    (out,) = interpreter.get_signature_runner()(image=x.numpy(), prompt=p.numpy()).values()
    with torch.no_grad():
        assert rel_l2(torch.from_numpy(np.asarray(out)), build(SPEC, HW, weights).model(x, p)) <= 1e-5
    assert not has_errors(check_static(path))


@pytest.mark.gpu
def test_litert_file_runs_fully_on_the_gpu_accelerator(exported):
    from depthport.check.gpu_runtime import run_gpu_check

    vulkan_or_skip()
    result = run_gpu_check(exported[0] / "prompt_da_tiny_fp32.tflite")
    assert result.fully_delegated is True and result.rejected_ops == (), result.note
    assert result.numeric_ok and result.rel_l2_vs_cpu < 1e-4


def test_verify_command_feeds_the_prompts(exported, tmp_path):
    out = tmp_path / "v"
    assert main(["verify", str(exported[0] / "prompt_da_tiny_fp32.tflite"), "--images", ASSET, "--out", str(out),
                 "--no-fp64"]) == 2  # a user's image needs its prompt beside it
    photo = tmp_path / "photos" / "cat.jpg"
    photo.parent.mkdir()
    Image.open(ASSET).save(photo)
    save_prompt_png(photo.with_name("cat.prompt.png"), (192, 256))
    assert main(["verify", str(exported[0] / "prompt_da_tiny_fp32.tflite"), "--images", str(photo.parent),
                 "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["verify"]["prompts"] == {"cat.jpg": "cat.prompt.png"} and report["prompt_shape"] == [1, 1, 192, 256]
    assert report["artifacts"][0]["checks"]["parity"]["state"] == "pass"


def test_a_prompt_is_found_beside_an_image_whose_name_is_not_utf8(tmp_path):
    """An image named in Latin-1 (caf\\xe9.jpg) is shown as caf\ufffd.jpg in reports; its prompt beside it,
    caf\\xe9.prompt.png, is still found (it was looked up under the shown name, and verification refused)."""
    from depthport.core.images import image_set
    from depthport.core.prompts import prompt_set

    folder = tmp_path / "photos"
    folder.mkdir()
    Image.open(ASSET).save(folder / os.fsdecode(b"caf\xe9.jpg"))
    save_prompt_png(folder / os.fsdecode(b"caf\xe9.prompt.png"), (24, 32), low_m=1.0, high_m=2.0)
    names = [name for name, _ in image_set(folder)[1]]
    assert names == ["caf\ufffd.jpg"]
    prompts, origins = prompt_set(folder, names, (24, 32))
    assert origins == {"caf\ufffd.jpg": "caf\ufffd.prompt.png"}
    assert prompts["caf\ufffd.jpg"].shape == (1, 1, 24, 32) and 1.0 <= prompts["caf\ufffd.jpg"].min() < 1.01


def save_prompt_png(path, hw, low_m=0.8, high_m=4.0):
    """A 16-bit PNG in millimetres, as an ARKit / DEPTH16 app saves depth."""
    ramp = np.linspace(low_m, high_m, hw[0] * hw[1]).reshape(hw)
    Image.fromarray((ramp * 1000).astype(np.uint16)).save(path)
    return path


def test_predict_takes_the_prompt_and_writes_metres_at_the_photo_size(exported, tmp_path):
    prompt = save_prompt_png(tmp_path / "depth.png", (192, 256))
    npy = tmp_path / "d.npy"
    assert main(["predict", str(exported[0] / "prompt_da_tiny_fp32.tflite"), ASSET, "-o", str(tmp_path / "d.png"),
                 "--npy", str(npy), "--prompt", str(prompt)]) == 0
    depth = np.load(npy)
    photo = Image.open(ASSET)
    assert depth.shape == (photo.height, photo.width) and Image.open(tmp_path / "d.png").size == photo.size
    assert 0.7 < float(np.median(depth)) < 4.1 and float(depth.std()) > 0.01


def test_predict_on_a_folder_reads_each_images_prompt_beside_it(exported, tmp_path, capsys):
    """A folder (or a pattern) of photos, each NAME.jpg with NAME.prompt.png / .npy beside it: each depth follows its
    own prompt's range (metres); the prompt files are not taken for photos, nor named as files passed over, also
    when the shell gives every file; an image without a prompt is reported and skipped, not fatal."""
    photos, out = tmp_path / "photos", tmp_path / "out"
    photos.mkdir()
    for name, (low, high) in {"a": (0.5, 1.5), "b": (4.0, 9.0), "c": (0.0, 0.0)}.items():
        Image.open(ASSET).save(photos / f"{name}.jpg")
        if name == "a":
            save_prompt_png(photos / "a.prompt.png", (192, 256), low, high)
        elif name == "b":
            np.save(photos / "b.prompt.npy", np.linspace(low, high, 192 * 256, dtype=np.float32).reshape(192, 256))
    model = str(exported[0] / "prompt_da_tiny_fp32.tflite")
    capsys.readouterr()
    assert main(["predict", model, str(photos), "-o", str(out), "--npy"]) == 0
    text = capsys.readouterr()
    assert "c.jpg" in text.out + text.err and "has no prompt beside it" in text.out + text.err
    assert sorted(p.name for p in out.iterdir()) == ["a.npy", "a.png", "b.npy", "b.png"]
    a, b = np.load(out / "a.npy"), np.load(out / "b.npy")
    assert 0.5 - 1e-3 <= a.min() and a.max() <= 1.5 + 1e-3 and 4.0 - 1e-3 <= b.min() and b.max() <= 9.0 + 1e-3
    assert "passed over" not in text.out  # b.prompt.npy was named among 'other files ... passed over'
    assert main(["predict", model, str(photos / "*.*"), "-o", str(tmp_path / "glob")]) == 0
    assert sorted(p.name for p in (tmp_path / "glob").iterdir()) == ["a.png", "b.png"]
    capsys.readouterr()  # the shell's photos/* (every file given): a.prompt.png was predicted as a photo of its own
    assert main(["predict", model, *map(str, sorted(photos.iterdir())), "-o", str(tmp_path / "files")]) == 0
    assert sorted(p.name for p in (tmp_path / "files").iterdir()) == ["a.png", "b.png"]
    assert "3 images, 1 skipped (c.jpg" in capsys.readouterr().out


def test_predict_on_a_video_takes_a_prompt_per_frame_from_a_stack(exported, tmp_path, capsys):
    """A video with an .npy stack (frames, h, w) of prompts in metres: frame i gets prompt i (its depth within that
    prompt's range); a frame beyond the stack is reported and skipped, a stack longer than the video is said; a stack
    that is not 3-D is one line, exit 2."""
    import av

    video, frames = tmp_path / "walk.mp4", 5
    with av.open(str(video), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.height, stream.width, stream.pix_fmt = 56, 70, "yuvj420p"
        for i in range(frames):
            for packet in stream.encode(av.VideoFrame.from_image(Image.open(ASSET).convert("RGB").resize((70, 56)))):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    ranges = [(0.5 + i, 1.0 + 2 * i) for i in range(frames - 1)]  # one frame short
    stack = np.stack([np.linspace(lo, hi, 192 * 256, dtype=np.float32).reshape(192, 256) for lo, hi in ranges])
    np.save(tmp_path / "lidar.npy", stack)
    model, out = str(exported[0] / "prompt_da_tiny_fp32.tflite"), tmp_path / "out"
    assert main(["predict", model, str(video), "--prompt", str(tmp_path / "lidar.npy"), "-o", str(out / "d.mp4"),
                 "--npy", str(out / "d.npy")]) == 0
    depth, stamps = np.load(out / "d.npy"), json.loads((out / "d.timestamps.json").read_text())
    assert depth.shape[0] == frames - 1 and stamps["frame"] == list(range(frames - 1))
    assert "none for frame 4" in stamps["skipped"][0]["error"]
    for d, (lo, hi) in zip(depth, ranges):
        assert lo - 1e-3 <= d.min() and d.max() <= hi + 1e-3
    np.save(tmp_path / "long.npy", np.concatenate([stack, stack[:3]]))  # 7 prompts: accepted without a word
    capsys.readouterr()
    assert main(["predict", model, str(video), "--prompt", str(tmp_path / "long.npy"), "-o", str(out / "l.mp4")]) == 0
    assert "the prompt stack holds 7 prompts for 5 frames: its last 2 were not used" in capsys.readouterr().out
    np.save(tmp_path / "flat.npy", stack[0])
    assert main(["predict", model, str(video), "--prompt", str(tmp_path / "flat.npy"), "-o", str(tmp_path / "x.mp4")]) == 2
    assert not (tmp_path / "x.mp4").exists()


BAD_PROMPTS = {
    "missing": (None, "takes a prompt depth map beside the image (192x256): pass --prompt"),
    "portrait": (lambda p: np.save(p, np.linspace(0.5, 4.0, 256 * 192).reshape(256, 192)),
                 "is 256x192 but the model takes a 192x256 prompt"),
    "8-bit png": (lambda p: Image.fromarray(np.arange(192 * 256, dtype=np.uint8).reshape(192, 256)).save(p),
                  "is a L image: a prompt PNG holds 16-bit millimetres"),
    "nan": (lambda p: np.save(p, np.full((192, 256), np.nan, np.float32)), "has NaN or infinite values"),
    "zeros": (lambda p: np.save(p, np.zeros((192, 256), np.float32)), "is 0 m everywhere"),
    "millimetres in npy": (lambda p: np.save(p, np.linspace(500, 4000, 192 * 256).reshape(192, 256)),
                           "too far for metres (millimetres?)"),
    "not a prompt": (lambda p: p.write_text("hello"), "p.npy: not an .npy file (its first bytes are not NumPy's)"),
}


@pytest.mark.parametrize("case", list(BAD_PROMPTS))
def test_bad_prompt_is_one_line_exit_2_and_nothing_written(exported, tmp_path, capsys, case):
    make, message = BAD_PROMPTS[case]
    argv = ["predict", str(exported[0] / "prompt_da_tiny_fp32.tflite"), ASSET, "-o", str(tmp_path / "out" / "d.png"),
            "--npy", str(tmp_path / "out" / "d.npy")]
    if make is not None:
        prompt = tmp_path / ("p.png" if "png" in case else "p.npy")
        make(prompt)
        argv += ["--prompt", str(prompt)]
    (tmp_path / "out").mkdir()
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not any((tmp_path / "out").iterdir())


def test_letterbox_and_a_stack_the_file_cannot_take_are_refused_before_any_frame(exported, tmp_path, capsys):
    """--letterbox padded the image but not its prompt (the two no longer lined up): refused. A video's stack of
    prompts in the other orientation was refused frame by frame (a line for each frame of a long video, after
    decoding it all); a PNG given as a video's stack was called 'pickled (object) data': now one line each, before
    any frame, without LiteRT's teardown lines after it. The stretch hint no longer offers --letterbox, and adds the
    turned prompt a file for a portrait photo needs."""
    import subprocess
    import sys

    import av

    tflite = str(exported[0] / "prompt_da_tiny_fp32.tflite")
    np.save(tmp_path / "p.npy", np.linspace(0.5, 4.0, 192 * 256).reshape(192, 256))
    np.save(tmp_path / "turned.npy", np.ones((3, 256, 192), np.float32))
    Image.fromarray(np.full((192, 256), 1500, np.uint16)).save(tmp_path / "p.png")
    with av.open(str(tmp_path / "clip.mp4"), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.height, stream.width, stream.pix_fmt = 56, 70, "yuvj420p"
        for packet in (*stream.encode(av.VideoFrame.from_image(Image.open(ASSET).convert("RGB").resize((70, 56)))),
                       *stream.encode()):
            container.mux(packet)
    for args, message in (
            ([ASSET, "--prompt", tmp_path / "p.npy", "--letterbox", "-o", tmp_path / "out" / "d.png"],
             "--letterbox pads the image to prompt_da_tiny_fp32.tflite's shape, and its prompt depth would no longer "
             "line up with it"),
            ([tmp_path / "clip.mp4", "--prompt", tmp_path / "p.png", "-o", tmp_path / "out" / "d.mp4"],
             f"cannot read the prompt stack {tmp_path / 'p.png'}: a PNG image, not an .npy (a video takes an .npy of "
             "(frames, h, w) metres)")):
        capsys.readouterr()
        assert main(["predict", tflite, *map(str, args)]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    Image.open(ASSET).rotate(90, expand=True).save(tmp_path / "portrait.jpg")  # the hint: no --letterbox
    assert main(["predict", tflite, str(tmp_path / "portrait.jpg"), "--prompt", str(tmp_path / "p.npy"), "-o",
                 str(tmp_path / "portrait.png")]) == 0
    assert ("the photo stretched 1.88x to the file's aspect (70x56): export a file for it (--long-side 70 --aspect "
            "2:3 --prompt-size 256x192)") in capsys.readouterr().out
    run = subprocess.run([sys.executable, "-m", "depthport", "predict", tflite, str(tmp_path / "clip.mp4"), "--prompt",
                          str(tmp_path / "turned.npy"), "-o", str(tmp_path / "out" / "d.mp4")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stderr.splitlines() == [
        "depthport predict: error: the prompt stack turned.npy holds 256x192 prompts but the model takes 192x256 "
        "ones (height x width; portrait and landscape differ)"], run.stderr[-2000:]
    assert not (tmp_path / "out").exists()


def test_a_photo_turned_upright_by_its_exif_is_said_beside_its_prompt(exported, tiny_tflite, tmp_path, capsys):
    """An iPhone stores a portrait photo turned and says so in EXIF; ARKit's depth stays in the camera's orientation.
    The photo is read upright and its prompt as stored, which then no longer line up unless the app turned the
    prompt too: said (it said nothing), for one photo and in a folder's summary; not for a photo stored upright, nor
    for a file without a prompt. The same for a portrait video and its prompt stack (a quarter turn only, as for
    photos)."""
    tflite = str(exported[0] / "prompt_da_tiny_fp32.tflite")
    photos = tmp_path / "photos"
    photos.mkdir()
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.open(ASSET).save(photos / "a.jpg", exif=exif)
    Image.open(ASSET).save(photos / "b.jpg")
    for name in ("a", "b"):
        np.save(photos / f"{name}.prompt.npy", np.linspace(0.5, 4.0, 192 * 256).reshape(192, 256))
    said = "turned upright by its EXIF orientation, its prompt used as stored: a prompt in the camera's orientation"
    for name, expected in (("a", True), ("b", False)):
        capsys.readouterr()
        assert main(["predict", tflite, str(photos / f"{name}.jpg"), "--prompt", str(photos / f"{name}.prompt.npy"),
                     "-o", str(tmp_path / f"{name}.png")]) == 0
        assert (f"; the photo {said}" in capsys.readouterr().out) is expected
    assert main(["predict", tflite, str(photos), "-o", str(tmp_path / "out")]) == 0
    assert f"; 1 photo (a.jpg) {said}" in capsys.readouterr().out
    assert main(["predict", str(tiny_tflite), str(photos / "a.jpg"), "-o", str(tmp_path / "plain.png")]) == 0
    assert "EXIF orientation" not in capsys.readouterr().out
    import av  # a phone's portrait video: stored turned, a display rotation says so

    np.save(tmp_path / "stack.npy", np.linspace(0.5, 4.0, 2 * 192 * 256).reshape(2, 192, 256))
    for rotation in (90, 180, 0):
        with av.open(str(tmp_path / f"r{rotation}.mp4"), "w") as container:
            stream = container.add_stream("mjpeg", rate=10)
            stream.height, stream.width, stream.pix_fmt = 56, 70, "yuvj420p"
            stream.set_display_rotation(rotation)
            frame = av.VideoFrame.from_image(Image.open(ASSET).convert("RGB").resize((70, 56)))
            for packet in [*stream.encode(frame), *stream.encode(frame), *stream.encode()]:
                container.mux(packet)
        assert main(["predict", tflite, str(tmp_path / f"r{rotation}.mp4"), "--prompt", str(tmp_path / "stack.npy"),
                     "-o", str(tmp_path / f"v{rotation}.mp4")]) == 0
        out = capsys.readouterr().out
        assert out.startswith("2 frames, 0 skipped")
        assert ("; the frames turned upright by the video's display rotation, the prompt stack used as stored: a "
                "prompt in the camera's orientation (ARKit's depth is) must be turned with its frame" in out
                ) is (rotation == 90), out


def test_an_output_that_would_overwrite_the_prompt_is_refused(exported, tmp_path, monkeypatch, capsys):
    """The prompt is the user's sensor capture: `predict FILE photo.jpg --prompt depth.png` (the default -o is
    depth.png) replaced it with the colourised depth; so did a video's stack (default NAME.npy) over a `--prompt`
    stack of that name. Now one line, exit 2, the prompt unchanged and nothing written."""
    import av

    photo = str(Path(ASSET).resolve())
    monkeypatch.chdir(tmp_path)
    model = str(exported[0] / "prompt_da_tiny_fp32.tflite")
    prompt = save_prompt_png(tmp_path / "depth.png", (192, 256))
    video = tmp_path / "walk.mp4"
    with av.open(str(video), "w") as container:
        stream = container.add_stream("mjpeg", rate=10)
        stream.height, stream.width, stream.pix_fmt = 56, 70, "yuvj420p"
        for packet in [*stream.encode(av.VideoFrame.from_image(Image.open(photo).convert("RGB").resize((70, 56)))),
                       *stream.encode()]:
            container.mux(packet)
    np.save(tmp_path / "walk_depth.npy", np.full((1, 192, 256), 2.0, np.float32))
    cases = [(["predict", model, photo, "--prompt", "depth.png"], "-o depth.png would overwrite the --prompt file"),
             (["predict", model, photo, "--prompt", str(prompt), "-o", "x.png", "--npy", str(prompt)],
              "would overwrite the --prompt file"),
             (["predict", model, str(video), "--prompt", "walk_depth.npy", "-o", "walk_depth.mp4"],
              "the depth stack (beside -o; --npy names it) walk_depth.npy would overwrite the --prompt stack")]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_prompt_on_a_one_image_file_and_a_prompt_size_for_an_image_model_are_refused(tiny_tflite, tmp_path, capsys):
    prompt = save_prompt_png(tmp_path / "depth.png", (192, 256))
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.open(ASSET).save(photos / "cat.jpg")
    cases = [(["predict", str(tiny_tflite), ASSET, "-o", str(tmp_path / "d.png"), "--prompt", str(prompt)],
              "--prompt is for files with a prompt depth input"),
             (["export", "da2-tiny", "--prompt-size", "192x256", "--out", str(tmp_path / "e")],
              "--prompt-size is for models with a prompt input"),
             (["export", "prompt-da-tiny", "--images", str(photos), "--out", str(tmp_path / "e")],
              "cat.jpg has no prompt beside it")]
    for argv, message in cases:
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "e").exists() and not (tmp_path / "d.png").exists()


# ------------------------------------------------------------------------------------------------------- the web pages
@pytest.fixture(scope="module")
def web_exported(tmp_path_factory):
    """`depthport export prompt-da-tiny --targets web,web-onnx` on one photo with its 16-bit PNG prompt: both pages
    verified in headless Chromium with the prompt (WASM; WebGPU FP32, and FP16 for LiteRT.js, on SwiftShader)."""
    browser_or_skip()
    photos = tmp_path_factory.mktemp("prompt-web-photos")
    Image.open(ASSET).save(photos / "cat.png")
    save_prompt_png(photos / "cat.prompt.png", (192, 256))
    out = tmp_path_factory.mktemp("prompt-web") / "out"
    code = main(["export", "prompt-da-tiny", "--targets", "web,web-onnx", "--images", str(photos), "--skip",
                 "ledger,bench", "--fast-shaders", "--out", str(out)])
    return out, json.loads((out / "report.json").read_text()), code, photos


@pytest.mark.browser
def test_web_pages_feed_the_prompt_on_wasm_and_webgpu(web_exported):
    out, report, code, _ = web_exported
    assert code == 0
    for art in report["artifacts"]:
        assert art["status"] == "shipped", art.get("status_reason")
        assert art["checks"]["parity"]["state"] == "pass" and art["parity"]["rel_l2_pooled"] <= 1e-5
        assert art["checks"]["webgpu_fp32"]["state"] == "pass", art["checks"]["webgpu_fp32"]
        backends = art["browser"]["backends"]
        assert backends["webgpu-fp32"]["vs_cpu"]["rel_l2_pooled"] < 1e-4 and "error" not in art["browser"]["shown"]
        config = json.loads((out / art["file"] / "depthport-web.json").read_text())
        assert config["prompt_shape"] == [1, 1, 192, 256] and (out / art["file"] / config["prompt"]).is_file()
    litert = {a["target"]: a for a in report["artifacts"]}["web"]
    assert litert["browser"]["backends"]["webgpu-fp16"]["fp16"]["predicted"]["arithmetic"] > 0
    assert report["verify"]["prompts"] == {"cat.png": "cat.prompt.png"}


@pytest.mark.browser
def test_web_page_reads_prompt_files_as_depthport_does(web_exported, tmp_path):
    """The page's .npy and 16-bit PNG readers give load_prompt's metres; a prompt of another shape is sampled
    (nearest) to the model's; a flat prompt is refused with load_prompt's reason."""
    from depthport.core.prompts import load_prompt
    from depthport.web import chromium
    from depthport.web.server import serving

    out, report, _, _ = web_exported
    folder = out / {a["target"]: a for a in report["artifacts"]}["web"]["file"]
    rng = np.random.default_rng(0)
    png16 = tmp_path / "tof.png"
    Image.fromarray(rng.integers(300, 6000, (90, 120)).astype(np.uint16)).save(png16)
    npy = tmp_path / "lidar.npy"
    np.save(npy, rng.uniform(0.2, 8.0, (192, 256)).astype(np.float32))
    flat = tmp_path / "flat.npy"
    np.save(flat, np.full((192, 256), 2.0, np.float32))
    with serving(folder) as url:
        page = chromium.shared_browser(True).open(url)
        try:
            for path in (png16, npy):
                depth, model_input = page.prompt_of(path.read_bytes(), path.name)
                expected = load_prompt(path)
                np.testing.assert_allclose(depth, expected, rtol=1e-6)
                rows, cols = np.arange(192) * expected.shape[0] // 192, np.arange(256) * expected.shape[1] // 256
                np.testing.assert_array_equal(model_input.reshape(192, 256), expected[rows][:, cols])
            with pytest.raises(RuntimeError, match="2 m everywhere: a prompt needs a range of depths"):
                page.prompt_of(flat.read_bytes(), flat.name)
        finally:
            page.close()


@pytest.mark.browser
def test_verify_command_feeds_the_prompts_to_a_web_folder(web_exported, tmp_path, capfd):
    """... and names the --images folder's subfolders it passes over, as for a model file."""
    out, report, _, shared = web_exported
    photos = tmp_path / "photos"
    shutil.copytree(shared, photos)
    (photos / "day2").mkdir()
    folder = out / {a["target"]: a for a in report["artifacts"]}["web-onnx"]["file"]
    assert main(["verify", str(folder), "--images", str(photos), "--backends", "wasm", "--fast-shaders",
                 "--out", str(tmp_path / "v")]) == 0
    assert (f"--images {photos}: 1 folder (day2) in the folder not searched: for every image under it give a quoted "
            f"pattern, '{photos / '**' / '*'}'") in capfd.readouterr().err
    verified = json.loads((tmp_path / "v" / "report.json").read_text())
    assert verified["verify"]["prompts"] == {"cat.png": "cat.prompt.png"}
    assert verified["prompt_shape"] == [1, 1, 192, 256]
    assert verified["artifacts"][0]["checks"]["parity"]["state"] == "pass"
    for key in ("output", "output_units", "prompt", "output_space"):  # the export's header (a builder each, before)
        assert verified[key] == report[key], key
    assert verified["output_units"]["label"] == "m"
