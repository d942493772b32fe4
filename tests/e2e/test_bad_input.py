"""Bad input of every kind: one line on stderr, exit status 2, no traceback, no native crash, no output file.

Cases where a native runtime could crash (a truncated .tflite made LiteRT segfault) run the command in a child
process, like the console script; the others run ``depthport.cli.main`` in-process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from depthport.cli import main
from depthport.preprocess import InputError, load_image
from depthport.runtimes.validate import validate_model_file

from helpers import TINY_HW

ASSET = "src/depthport/assets/chelsea.jpg"
SUFFIXES = ("tflite", "pte", "onnx")
# The console script: main(), then the runtimes' teardown log lines muted.
ENTRY_CHILD = "import sys\nfrom depthport.cli import entry\nsys.argv[0] = 'depthport'\nentry()"


# ------------------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def export_of(tiny_tflite, tiny_built, tmp_path_factory):
    """suffix -> a real tiny export in that format, made on first use (once for this module)."""
    out, made = tmp_path_factory.mktemp("models"), {"tflite": Path(tiny_tflite)}

    def get(suffix: str) -> Path:
        if suffix not in made:
            if suffix == "onnx":
                from depthport.export.onnx import export_onnx

                made[suffix] = export_onnx(tiny_built.model, TINY_HW, out / "tiny.onnx")
            else:
                from depthport.export.targets import ExportContext, load_all

                made[suffix] = out / load_all()["xnnpack-fp32"](ExportContext(tiny_built, out, "tiny"))["file"]
        return made[suffix]

    return get


@pytest.fixture(scope="module")
def bad_model(export_of, tmp_path_factory):
    """("truncated" | "empty", suffix) -> the first half of a real export's bytes, or zero bytes."""
    folder = tmp_path_factory.mktemp("bad_models")

    def get(kind: str, suffix: str) -> Path:
        path = folder / f"{kind}.{suffix}"
        if not path.exists():
            data = export_of(suffix).read_bytes() if kind == "truncated" else b""
            path.write_bytes(data[: len(data) // 2])
        return path

    return get


def command(name: str, model, out: Path) -> list[str]:
    """predict / bench / verify of ``model``, every output under ``out``."""
    if name == "predict":
        return ["predict", str(model), ASSET, "-o", str(out / "o.png"), "--npy", str(out / "o.npy")]
    if name == "bench":
        return ["bench", str(model), "--rounds", "1", "--iters", "1", "--warmup", "0", "--no-memory",
                "--json", str(out / "b.json")]
    return ["verify", str(model), "--reference", "da2-tiny", "--weights", "random", "--out", str(out / "v")]


def one_line(err: str, *needles: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def refused(capsys, argv: list[str], *needles: str) -> str:
    """``main(argv)`` exits 2 with one error line holding ``needles``."""
    capsys.readouterr()
    assert main(argv) == 2
    return one_line(capsys.readouterr().err, *needles)


def in_child(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", ENTRY_CHILD, *argv], capture_output=True, text=True, timeout=600)


@pytest.fixture
def out(tmp_path) -> Path:
    """An empty folder for a command's outputs: a refused command must leave it empty."""
    folder = tmp_path / "out"
    folder.mkdir()
    return folder


# ------------------------------------------------------------------------------------------------------ model files
def test_check_of_a_truncated_tflite_says_why(bad_model, capsys):
    """check named the flatbuffers library's exception class for it, '(error)', where predict and bench say that the
    flatbuffer points past the end of the file."""
    refused(capsys, ["check", str(bad_model("truncated", "tflite"))],
            "truncated.tflite: truncated or corrupt TFLite model: its flatbuffer points past the end of the file (")


@pytest.mark.parametrize("name", ["predict", "bench", "verify"])
def test_truncated_tflite_is_one_line_not_a_segfault(bad_model, out, name):
    """LiteRT reads a truncated .tflite unchecked and died with SIGSEGV; now it is checked in Python first."""
    run = in_child(command(name, bad_model("truncated", "tflite"), out))
    assert run.returncode == 2, (run.returncode, run.stderr[-2000:])
    one_line(run.stderr, f"depthport {name}: error:", "truncated.tflite is truncated or corrupt")
    assert not list(out.iterdir())


@pytest.mark.parametrize("name", ["predict", "bench", "verify"])
@pytest.mark.parametrize("kind,suffix,message", [
    ("truncated", "pte", "is truncated: its header announces"),
    ("truncated", "onnx", "is not a valid ONNX model: its protobuf does not parse"),
    ("empty", "tflite", "is empty (0 bytes)"),
    ("empty", "pte", "is empty (0 bytes)"),
    ("empty", "onnx", "is empty (0 bytes)"),
])
def test_bad_model_file_is_one_line(bad_model, out, capsys, name, kind, suffix, message):
    refused(capsys, command(name, bad_model(kind, suffix), out), f"depthport {name}: error:", message)
    assert not list(out.iterdir())


@pytest.mark.parametrize("suffix", SUFFIXES)
def test_every_cut_of_a_real_export_is_refused_in_python(export_of, tmp_path, suffix):
    data = export_of(suffix).read_bytes()
    assert validate_model_file(export_of(suffix)) == export_of(suffix)
    n = len(data)
    for cut in sorted({0, 4, 8, 16, 40, 64, 1000, n // 4, n // 2, 3 * n // 4, n - 8, n - 1}):
        path = tmp_path / f"cut{cut}.{suffix}"
        path.write_bytes(data[:cut])
        with pytest.raises(InputError):
            validate_model_file(path)


def test_tflite_string_running_past_the_end_is_refused(tiny_tflite, tmp_path, capsys):
    """A corrupt string length (seen when fuzzing: LiteRT then reads past the file and may segfault)."""
    data = bytearray(Path(tiny_tflite).read_bytes())
    name = b"serving_default_args_0"
    at = data.index(name + b"\0")
    assert int.from_bytes(data[at - 4:at], "little") == len(name)
    data[at - 4:at] = (0x7FFFFFF0).to_bytes(4, "little")
    bad = tmp_path / "long_name.tflite"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match="runs to byte"):
        validate_model_file(bad)
    run = in_child(command("predict", bad, tmp_path))
    assert run.returncode == 2 and "long_name.tflite is truncated or corrupt" in one_line(run.stderr)


def test_tflite_that_litert_refuses_is_one_line(tiny_tflite, tmp_path):
    """A well-formed file with an operator LiteRT does not know passes validation; LiteRT's refusal is one line
    (its environment, which logs "DestroyAccelerator" lines when freed, goes while native stderr is muted)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(Path(tiny_tflite).read_bytes(), 0)
    for code in model.operatorCodes:
        code.builtinCode, code.deprecatedBuiltinCode = 4000, 127
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    bad = tmp_path / "unknown_op.tflite"
    bad.write_bytes(bytes(builder.Output()))
    validate_model_file(bad)
    run = in_child(["predict", str(bad), ASSET, "-o", str(tmp_path / "o.png")])
    assert run.returncode == 2
    one_line(run.stderr, "LiteRT cannot load unknown_op.tflite: Failed to build TFL interpreter")
    assert not (tmp_path / "o.png").exists()


@pytest.mark.parametrize("name", ["predict", "bench", "verify"])
def test_unsupported_suffix_missing_file_and_folder(tmp_path, out, capsys, name):
    other = tmp_path / "model.h5"
    other.write_bytes(b"xx")
    refused(capsys, command(name, other, out), "unsupported model file model.h5")
    refused(capsys, command(name, tmp_path / "missing.tflite", out), "model file not found")
    folder = tmp_path / "folder.tflite"
    folder.mkdir()
    # verify checks its files itself first ("model file not found"); predict and bench say what the path is
    refused(capsys, command(name, folder, out), "model file not found" if name == "verify" else "is a folder")
    # a model id where the file goes: the command that makes its file
    refused(capsys, command(name, "da2-small", out), "da2-small is a model id",
            "`depthport export da2-small --out DIR`")
    latin1 = Path(os.fsdecode(bytes(tmp_path) + b"/mod\xe8le.tflite"))  # the runtimes' loaders take UTF-8 paths only
    latin1.write_bytes(b"TFL3")
    refused(capsys, command(name, latin1, out), "model file ", "mod\ufffdle.tflite: the path is not valid UTF-8")
    assert not list(out.iterdir())



@pytest.mark.parametrize("name", ["predict", "bench", "verify"])
def test_an_export_folder_given_as_the_model_names_its_files(tiny_tflite, tmp_path, out, capsys, name):
    export = tmp_path / "export"
    export.mkdir()
    for file in ("b.onnx", "a.tflite", "report.json"):
        (export / file).write_bytes(Path(tiny_tflite).read_bytes())
    refused(capsys, command(name, export, out), f"model path {export} is a folder, not a model file; it holds "
            f"a.tflite, b.onnx: give one, e.g. {export / 'a.tflite'}")


def test_predict_with_the_image_and_the_model_swapped_says_the_order(tiny_tflite, tmp_path, out, capsys):
    photo = tmp_path / "IMG_0001.jpg"
    Image.new("RGB", (40, 30), (90, 120, 200)).save(photo)
    refused(capsys, ["predict", str(photo), str(tiny_tflite)],
            f"{tiny_tflite} is the model file and {photo} is not: the model comes first, "
            f"depthport predict {tiny_tflite} {photo}")
    assert photo.stat().st_size > 0 and not list(out.iterdir())

# ------------------------------------------------------------------------------------------------------ images
def predict_args(model, image, out: Path) -> list[str]:
    return ["predict", str(model), str(image), "-o", str(out / "o.png"), "--npy", str(out / "o.npy")]


@pytest.mark.parametrize("make,message", [
    (lambda p: p.mkdir(), "no images in"),  # a folder is many inputs: here none
    (lambda p: p.write_bytes(b""), "the file is empty (0 bytes)"),
    (lambda p: p.write_text("hello, not a picture\n"), "a text file, not an image"),
    (lambda p: p.write_bytes(bytes(range(256)) * 4), "not a .jpg image Pillow can read: damaged, cut short, or "
                                                     "another kind of file named .jpg"),
    (lambda p: p.write_bytes((Path(ASSET).read_bytes())[:400]), "the file ends early"),  # in its header
    (lambda p: p.write_bytes((Path(ASSET).read_bytes())[:20000]), "the file ends early (a copy or a download cut "
                                                                  "short?): image file is truncated"),
])
def test_unreadable_image_is_one_line(tiny_tflite, tmp_path, out, capsys, make, message):
    image = tmp_path / "image.jpg"
    make(image)
    refused(capsys, predict_args(tiny_tflite, image, out), "depthport predict: error:", message)
    assert not list(out.iterdir())


@pytest.mark.parametrize("suffix,message", [
    ("webp", "the file is damaged or cut short (could not create decoder object)"),  # libwebp's words
    ("avif", "not a .avif image Pillow can read: damaged, cut short, or another kind of file named .avif"),
    ("png", "the file ends early (a copy or a download cut short?): image file is truncated"),
])
def test_an_image_cut_short_says_so(tmp_path, suffix, message):
    """The first half of a photo (a copy or download that did not finish) is said to be cut short, in the words each
    format allows: they were Pillow's own ('could not create decoder object', 'not an image format Pillow can read'
    for an .avif, which it reads)."""
    whole = tmp_path / f"whole.{suffix}"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 80, 3), np.uint8)).save(whole)
    (tmp_path / f"cut.{suffix}").write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with pytest.raises(InputError, match=re.escape(f"cannot read image {tmp_path / f'cut.{suffix}'}: {message}")):
        load_image(tmp_path / f"cut.{suffix}")


def _zeroed_idat(data: bytes) -> bytes:
    at = data.index(b"IDAT") + 10
    return data[:at] + bytes(20) + data[at + 20:]


def _bmp_header_size(data: bytes) -> bytes:
    return data[:14] + (99).to_bytes(4, "little") + data[18:]


@pytest.mark.parametrize("suffix,damage,words", [
    ("png", _zeroed_idat, "broken data stream when reading image file"),
    ("bmp", _bmp_header_size, "Unsupported BMP header type (99)"),
])
def test_a_damaged_image_says_it_is_damaged(tmp_path, suffix, damage, words):
    """A decoder's own words ('broken data stream when reading image file') were the whole line: now they follow what
    they mean to someone holding the file."""
    whole = tmp_path / f"whole.{suffix}"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (60, 80, 3), np.uint8)).save(whole)
    (tmp_path / f"bad.{suffix}").write_bytes(damage(whole.read_bytes()))
    with pytest.raises(InputError, match=re.escape(f"cannot read image {tmp_path / f'bad.{suffix}'}: the file is "
                                                   f"damaged, or a variant of its format Pillow does not decode: "
                                                   f"{words}")):
        load_image(tmp_path / f"bad.{suffix}")


def rgba_with_hidden_colour() -> Image.Image:
    """40x50 RGBA: left columns fully transparent over a saturated green, a half-transparent band, the rest opaque."""
    rgb = np.random.default_rng(0).integers(0, 255, (40, 50, 3), np.uint8)
    rgb[:, :10] = (10, 200, 30)
    alpha = np.full((40, 50), 255, np.uint8)
    alpha[:, :10], alpha[:, 10:20] = 0, 128
    return Image.fromarray(np.dstack([rgb, alpha]), "RGBA")


@pytest.mark.parametrize("mode", ["RGBA", "LA", "P"])
def test_image_with_transparency_is_composited_on_white(tiny_tflite, tmp_path, out, capsys, mode):
    src = rgba_with_hidden_colour()
    path = tmp_path / f"alpha_{mode}.png"
    if mode == "P":  # a palette image whose index 0 is the transparent colour
        pal = src.convert("RGB").quantize(16)
        pal.info["transparency"] = 0
        pal.save(path, transparency=0)
    else:
        (src.convert("LA") if mode == "LA" else src).save(path)
    assert Image.open(path).mode == mode
    img = load_image(path)
    assert img.mode == "RGB" and img.size == (50, 40)
    if mode != "P":
        pixels = np.asarray(img).astype(int)
        assert (pixels[:, :10] == 255).all()  # fully transparent: white, not the hidden colour
        opaque = np.asarray(src.convert(mode).convert("RGBA"))[:, 20:, :3].astype(int)
        assert np.array_equal(pixels[:, 20:], opaque)
        half = np.asarray(src.convert(mode).convert("RGBA"))[:, 10:20, :3].astype(int)
        assert np.abs(pixels[:, 10:20] - (half * 128 + 255 * 127) / 255).max() <= 1
    assert main(predict_args(tiny_tflite, path, out)) == 0
    assert Image.open(out / "o.png").size == (50, 40) and np.load(out / "o.npy").shape == (40, 50)


def test_32_bit_greyscale_is_refused_clearly(tiny_tflite, tmp_path, out, capsys):
    path = tmp_path / "grey.tif"
    Image.fromarray(np.full((40, 50), 1000, np.int32)).save(path)
    assert Image.open(path).mode == "I"
    refused(capsys, predict_args(tiny_tflite, path, out), "unsupported image mode 'I'", "convert it to 8 bits")
    assert not list(out.iterdir())


@pytest.mark.parametrize("name", ["grey.png", "grey.tif"])
def test_16_bit_greyscale_is_read_at_full_range_as_viewers_show_it(tiny_tflite, tmp_path, out, name):
    samples = np.tile(np.linspace(0, 65535, 50).astype(np.uint16), (40, 1))
    samples[:, 0] = 1000
    path = tmp_path / name
    Image.fromarray(samples).save(path)
    assert Image.open(path).mode.startswith("I;16")
    pixels = np.asarray(load_image(path)).astype(int)
    assert pixels.shape == (40, 50, 3) and (pixels == (samples >> 8)[..., None]).all()
    assert pixels[0, -1, 0] == 255 and pixels[0, 0, 0] == 3
    assert main(predict_args(tiny_tflite, path, out)) == 0
    assert np.load(out / "o.npy").shape == (40, 50)


def test_16_bit_greyscale_with_a_transparent_level_is_composited_onto_white(tmp_path):
    samples = np.full((20, 30), 20000, np.uint16)
    samples[:, :10] = 7
    path = tmp_path / "grey.png"
    Image.fromarray(samples).save(path, transparency=7)
    pixels = np.asarray(load_image(path)).astype(int)
    assert (pixels[:, :10] == 255).all() and (pixels[:, 10:] == 20000 >> 8).all()


# ------------------------------------------------------------------------------------------------------ many inputs
def tiny_video(path: Path, frames: int = 2) -> Path:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuvj420p"
        for _ in range(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.zeros((24, 32, 3), np.uint8), "rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


@pytest.mark.parametrize("case,message", [
    ("not-a-video", "cannot read video"),
    ("missing-video", "video not found"),
    ("no-match", "no files match the pattern"),
    ("only-bad-images", "none of the 2 images could be processed; first: bad.png: cannot read image"),
    ("only-bad-videos", "none of the 2 videos could be processed; first: a.mp4: cannot read video"),
    ("no-image-or-video", "matches no file named like an image or a video: 2 other files (.AAE, .json)"),
])
def test_many_inputs_that_cannot_be_read_are_one_line(tiny_tflite, tmp_path, out, capsys, case, message):
    source = {"not-a-video": tmp_path / "clip.mp4", "missing-video": tmp_path / "missing.mov",
              "no-match": tmp_path / "*.jpg", "only-bad-images": tmp_path / "photos",
              "only-bad-videos": tmp_path / "clips", "no-image-or-video": tmp_path / "IMG_*"}[case]
    if case == "not-a-video":
        source.write_text("not a video")
    elif case == "only-bad-images":
        source.mkdir()
        (source / "bad.png").write_text("not an image")
        (source / "empty.jpg").write_bytes(b"")
    elif case == "only-bad-videos":
        source.mkdir()
        (source / "a.mp4").write_text("not a video")
        (source / "b.MOV").write_bytes(b"")
    elif case == "no-image-or-video":
        (tmp_path / "IMG_0001.AAE").write_text("<plist/>")
        (tmp_path / "IMG_0001.json").write_text("{}")
    argv = ["predict", str(tiny_tflite), str(source), "-o", str(out / "depth")]
    if case.startswith("only-bad"):  # each skipped input has its line as it goes, then the error, and nothing more
        run = in_child(argv)  # (the runtime's teardown log lines used to follow: the error held the loaded model)
        assert run.returncode == 2
        *skips, last = run.stderr.strip().splitlines()
        names = ["bad.png", "empty.jpg"] if case == "only-bad-images" else ["a.mp4", "b.MOV"]
        assert [line.split(":")[0] for line in skips] == [f"skipped {name}" for name in names], run.stderr
        assert last.startswith("depthport predict: error: ") and message in last
    else:
        refused(capsys, argv, "depthport predict: error:", message)
    assert not list(out.iterdir())


def test_many_inputs_refuse_outputs_before_any_work(tiny_tflite, tmp_path, out, capsys):
    """An output folder that would overwrite an input, -o a file for many images, a video written under a suffix
    PyAV is not asked to write, a stack over the video: refused, nothing written, the inputs unchanged."""
    photos = tmp_path / "photos"
    photos.mkdir()
    Image.new("RGB", (30, 20), (200, 10, 10)).save(photos / "a.png")
    before = (photos / "a.png").read_bytes()
    refused(capsys, ["predict", str(tiny_tflite), str(photos), "-o", str(photos)],
            "-o would overwrite the image", "a.png")
    (out / "file").write_text("a file")
    refused(capsys, ["predict", str(tiny_tflite), str(photos), "-o", str(out / "file")],
            f"-o {out / 'file'} is a file; for a folder or pattern of images -o is a folder")
    refused(capsys, ["predict", str(tiny_tflite), str(photos), "-o", str(out / "depth.png")],
            f"-o {out / 'depth.png'} names a file", f"give -o FOLDER (e.g. {out / 'depth'})")
    refused(capsys, ["predict", str(tiny_tflite), str(photos), "--npy", str(out / "depth.npy")],
            f"--npy {out / 'depth.npy'} names a file")
    video = tiny_video(tmp_path / "clip.mp4")
    refused(capsys, ["predict", str(tiny_tflite), str(video), "-o", str(out / "d.png")],
            "a depth video is written as .mp4, .mov, .mkv")
    refused(capsys, ["predict", str(tiny_tflite), str(video), "-o", str(out / "d.mp4"), "--npy", str(video)],
            "would overwrite the video")
    refused(capsys, ["predict", str(tiny_tflite), str(video), "-o", str(out / "d.mp4"), "--npy", str(out / "d.txt")],
            f"--npy {out / 'd.txt'}: the depth stack is written as .npy")
    assert [p.name for p in out.iterdir()] == ["file"] and (photos / "a.png").read_bytes() == before
    assert sorted(p.name for p in photos.iterdir()) == ["a.png"]


# ------------------------------------------------------------------------------------------------------ outputs
def test_output_that_is_an_existing_folder_is_refused(tiny_tflite, out, capsys):
    """Where the file itself would go a folder stands (one image's -o names a folder: the image's name in it);
    the example file name has the output's suffix."""
    (out / "chelsea.png").mkdir()
    refused(capsys, ["predict", str(tiny_tflite), ASSET, "-o", str(out)],
            f"-o {out / 'chelsea.png'} is a folder; give a file name, e.g. {out / 'chelsea.png' / 'depth.png'}")
    refused(capsys, ["bench", str(tiny_tflite), "--json", str(out)], f"--json {out} is a folder; give a file name, "
            f"e.g. {out / 'bench.json'}")
    assert [p.name for p in out.iterdir()] == ["chelsea.png"] and not list((out / "chelsea.png").iterdir())


@pytest.mark.parametrize("option", ["-o", "--npy"])
def test_output_under_a_regular_file_is_refused(tiny_tflite, tmp_path, out, capsys, option):
    """somefile.txt/out.png: NotADirectoryError even as root (where chmod would not block the write)."""
    blocker = tmp_path / "somefile.txt"
    blocker.write_text("a file")
    argv = ["predict", str(tiny_tflite), ASSET, "-o", str(out / "o.png"), "--npy", str(out / "o.npy")]
    argv[argv.index(option) + 1] = str(blocker / "deeper" / "out.bin")
    refused(capsys, argv, f"cannot write {option}", f"{blocker} is a file, not a folder")
    assert not list(out.iterdir()) and blocker.read_text() == "a file"


def test_npy_is_not_written_without_the_png(tiny_tflite, tmp_path, out, capsys):
    """Both outputs are renamed into place only once both are written."""
    refused(capsys, ["predict", str(tiny_tflite), ASSET, "-o", str(out / "same.png"), "--npy",
                     str(out / "same.png")], "would overwrite the -o file")
    copy = tmp_path / "copy.jpg"
    copy.write_bytes(Path(ASSET).read_bytes())
    refused(capsys, ["predict", str(tiny_tflite), str(copy), "-o", str(copy)], "would overwrite the image")
    refused(capsys, ["predict", str(tiny_tflite), ASSET, "-o", str(tiny_tflite)], "would overwrite the model file")
    assert copy.read_bytes() == Path(ASSET).read_bytes() and not list(out.iterdir())


@pytest.mark.parametrize("option, name, want", [("-o", "depth.jpg", ".png"), ("-o", "depth", ".png"),
                                                ("--npy", "depth.txt", ".npy")])
def test_output_named_for_another_format_is_refused(tiny_tflite, out, capsys, option, name, want):
    """A PNG is not written under a .jpg name (nor an .npy under .txt): one line naming the format it is."""
    argv = ["predict", str(tiny_tflite), ASSET, "-o", str(out / "o.png"), "--npy", str(out / "o.npy")]
    argv[argv.index(option) + 1] = str(out / name)
    refused(capsys, argv, f"{option} {out / name}: the depth is written as {want}", f"give {option} NAME{want}")
    assert not list(out.iterdir())


def test_output_folder_that_does_not_exist_is_created(tiny_tflite, out, capsys):
    png = out / "new" / "sub" / "o.png"
    assert main(["predict", str(tiny_tflite), ASSET, "-o", str(png)]) == 0
    assert png.is_file() and [p.name for p in png.parent.iterdir()] == ["o.png"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_output_folder_without_write_permission_is_refused(tiny_tflite, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        refused(capsys, ["predict", str(tiny_tflite), ASSET, "-o", str(locked / "o.png")], "no permission to write")
    finally:
        locked.chmod(0o700)


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="no /proc (not Linux)")
def test_an_output_where_no_file_can_be_made_is_named_not_its_temporary_file(tiny_tflite, capsys):
    """/proc takes no new file, root or not: the error named the temporary file the user never gave ('[Errno 2] No
    such file or directory: '/proc/.x.png.gmo2u04x.part''); it names the output. Nor a folder (-o for a folder of
    images): a bare errno line, with the runtime's teardown lines after it."""
    err = refused(capsys, ["predict", str(tiny_tflite), ASSET, "-o", "/proc/x.png"],
                  "cannot write /proc/x.png: No such file or directory")
    assert ".part" not in err
    folder = Path(ASSET).parent  # a folder there, where no folder can be made: a bare '[Errno 2] ...' line
    refused(capsys, ["predict", str(tiny_tflite), str(folder), "-o", "/proc/depth"],
            "cannot write /proc/depth/chelsea.png: No such file or directory (making the folder /proc/depth)")


def test_an_export_too_large_for_any_memory_is_one_line(tmp_path, capsys):
    """--size 140000x140000 was a traceback from torch's allocator (exit 1); a size no machine can hold (12.8 PB at
    the first allocation, past any address space) is one line, exit 2, and nothing is left."""
    refused(capsys, ["export", "da2-tiny", "--weights", "random", "--size", "140000000x140000000", "--out",
                     str(tmp_path / "big")],
            "not enough memory: it tried to allocate ", " GB (a smaller --size needs less)")
    assert list(tmp_path.iterdir()) == []


def test_an_aspect_alone_keeps_the_models_long_side_and_is_refused_beside_a_size():
    """--aspect 9:16 without --long-side was ignored without a word (the export came out landscape): it takes the
    model's default long side now; beside --size it is refused, as --long-side is."""
    from argparse import Namespace

    from depthport.cli.common import export_size

    def size(**given):
        return export_size(Namespace(**{"size": None, "long_side": None, "aspect": None, **given}), (518, 686))

    assert size(aspect="9:16") == (686, 392) and size(long_side=518) == (392, 518) and size() == (518, 686)
    assert size(long_side=518, aspect="1:1") == (518, 518)
    with pytest.raises(InputError, match="give either --size or --long-side/--aspect, not both"):
        size(size="518x518", aspect="9:16")


def test_os_errors_on_user_paths_are_one_line(tiny_tflite, tmp_path, capsys):
    """verify --out under a regular file fails in mkdir (NotADirectoryError): main reports it as bad input."""
    blocker = tmp_path / "somefile.txt"
    blocker.write_text("a file")
    refused(capsys, ["verify", str(tiny_tflite), "--reference", "da2-tiny", "--weights", "random",
                     "--images", ASSET, "--no-eager", "--out", str(blocker / "v")], "Not a directory")
    assert blocker.read_text() == "a file"


# ------------------------------------------------------------------------------------------------------ --threads
@pytest.mark.parametrize("value,message", [("0", "must be at least 1 thread, got 0"),
                                           ("-1", "must be at least 1 thread, got -1"),
                                           ("two", "expected a whole number of threads")])
@pytest.mark.parametrize("name", ["predict", "bench", "verify", "export"])
def test_threads_below_one_is_refused_by_argparse(tiny_tflite, out, capsys, name, value, message):
    argv = command(name, tiny_tflite, out) if name != "export" else ["export", "da2-tiny", "--out", str(out / "e")]
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--threads", value])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.lstrip().startswith("usage: depthport")
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"depthport {name}: error: argument --threads: ") and message in last
    assert not list(out.iterdir())


def test_file_names_that_are_not_utf8_are_read_written_and_printed_as_stored(tiny_tflite, tmp_path):
    """Latin-1 names (old cameras, zips, Windows copies) in a folder: each output keeps its image's name bytes, and
    the progress, skip and summary lines print them as stored, where they raised UnicodeEncodeError."""
    folder, out = tmp_path / "latin1", tmp_path / "depth"
    folder.mkdir()
    Image.new("RGB", (40, 30), (200, 100, 50)).save(folder / "ok.jpg")
    os.rename(bytes(folder / "ok.jpg"), bytes(folder) + b"/caf\xe9.jpg")
    (Path(os.fsdecode(bytes(folder) + b"/bad\xe9.png"))).write_text("not an image")
    run = subprocess.run([sys.executable, "-c", ENTRY_CHILD, "predict", str(tiny_tflite), str(folder), "-o", str(out)],
                         capture_output=True, timeout=600, env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert run.returncode == 0 and b"Traceback" not in run.stderr, run.stderr[-2000:]
    assert os.listdir(bytes(out)) == [b"caf\xe9.png"]
    assert b"skipped bad\xe9.png: cannot read image" in run.stderr and b"2 images, 1 skipped (bad\xe9.png" in run.stdout


# ------------------------------------------------------------------------------------------------------ --images
@pytest.fixture(params=["empty", "no-images", "unreadable"])
def image_folder(request, tmp_path):
    folder = tmp_path / request.param
    folder.mkdir()
    if request.param == "no-images":
        (folder / "notes.txt").write_text("not an image")
        (folder / "sub.png").mkdir()
    elif request.param == "unreadable":
        (folder / "bad.png").write_text("not an image")
        (folder / "empty.jpg").write_bytes(b"")
    return folder


@pytest.mark.parametrize("name", ["verify", "export"])
def test_image_folder_without_readable_images(tiny_tflite, out, capsys, image_folder, name):
    argv = (command("verify", tiny_tflite, out) if name == "verify"
            else ["export", "da2-tiny", "--size", "56x70", "--out", str(out / "e")])
    readable = "readable " if image_folder.name == "unreadable" else ""
    refused(capsys, [*argv, "--images", str(image_folder)], f"no {readable}images in {image_folder}",
            "looked for .png, .jpg")
    assert not list(out.iterdir())
