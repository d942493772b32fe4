// depthport's browser page: one depth model run with LiteRT.js (.tflite) or onnxruntime-web (.onnx), on WebGPU when
// the browser has it, else on WASM (the switch on the page). Everything it loads is in this folder; serve it with
// `depthport serve DIR` (127.0.0.1, with the cross-origin isolation headers that threaded WASM needs).
//
// Preprocessing is depthport's (`depthport.preprocess.to_tensor`): the image stretched to the export shape with
// Pillow's bicubic resample (Resample.c: 8 bits per channel, 22-bit fixed-point weights, two passes in Pillow 13's
// order, each rounded to 8 bits), x/255, ImageNet mean/std, NCHW float32. Given the same decoded pixels it is bit for
// bit what depthport feeds the model; `depthport verify` checks that on every verification image.

const PRECISION_BITS = 22;
const ONE = 2 ** PRECISION_BITS;
const page = {config: null, engines: new Map(), backend: null, precision: 'fp32', image: null, prompt: null, gpu: null};

// ---- preprocessing -------------------------------------------------------------------------------------------

function bicubic(x) {  // Pillow's bicubic_filter, a = -0.5
  const a = -0.5;
  x = Math.abs(x);
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

function coefficients(inSize, outSize) {  // Pillow's precompute_coeffs + normalize_coeffs_8bpc
  const scale = inSize / outSize;
  const filterscale = Math.max(scale, 1);
  const support = 2 * filterscale;
  const ksize = Math.ceil(support) * 2 + 1;
  const ss = 1 / filterscale;  // multiplied, not divided: the same rounding as Pillow
  const bounds = new Int32Array(outSize * 2);
  const kk = new Float64Array(outSize * ksize);
  for (let xx = 0; xx < outSize; xx++) {
    const center = (xx + 0.5) * scale;
    const xmin = Math.max(0, Math.trunc(center - support + 0.5));
    const xmax = Math.min(inSize, Math.trunc(center + support + 0.5)) - xmin;
    const w = [];
    let ww = 0;
    for (let x = 0; x < xmax; x++) {
      w.push(bicubic((x + xmin - center + 0.5) * ss));
      ww += w[x];
    }
    for (let x = 0; x < xmax; x++) {
      const k = ww !== 0 ? w[x] / ww : w[x];
      kk[xx * ksize + x] = k < 0 ? Math.trunc(-0.5 + k * ONE) : Math.trunc(0.5 + k * ONE);
    }
    bounds[xx * 2] = xmin;
    bounds[xx * 2 + 1] = xmax;
  }
  return {ksize, bounds, kk};
}

// One resampling pass over RGB bytes (3 per pixel): along x (horizontal) or y, as Pillow's ImagingResample*_8bpc.
function pass(src, w, h, outSize, horizontal) {
  const {ksize, bounds, kk} = coefficients(horizontal ? w : h, outSize);
  const ow = horizontal ? outSize : w;
  const oh = horizontal ? h : outSize;
  const out = new Uint8Array(ow * oh * 3);
  const step = horizontal ? 3 : w * 3;
  for (let y = 0; y < oh; y++) {
    for (let x = 0; x < ow; x++) {
      const o = horizontal ? x : y;
      const [min, n] = [bounds[o * 2], bounds[o * 2 + 1]];
      const base = horizontal ? (y * w + min) * 3 : (min * w + x) * 3;
      for (let c = 0; c < 3; c++) {
        let ss = ONE / 2;
        for (let i = 0; i < n; i++) ss += src[base + i * step + c] * kk[o * ksize + i];
        out[(y * ow + x) * 3 + c] = Math.min(255, Math.max(0, Math.floor(ss / ONE)));
      }
    }
  }
  return out;
}

// Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many pixels as the width
// (found by comparing both orders with Pillow 13.0 on 190 random shapes), else the horizontal pass first.
export function resizeRGB(rgb, w, h, outW, outH) {
  if (outH < h && h - outH > 2 * (w - outW)) {
    const img = outH !== h ? pass(rgb, w, h, outH, false) : rgb;
    return outW !== w ? pass(img, w, outH, outW, true) : img;
  }
  const img = outW !== w ? pass(rgb, w, h, outW, true) : rgb;
  return outH !== h ? pass(img, outW, h, outH, false) : img;
}

// RGBA pixels -> RGB bytes, transparency composited onto white with Pillow's alpha_composite arithmetic (as
// depthport.preprocess.load_image does). The canvas stores pixels premultiplied, so a semi-transparent pixel may
// already be a level off before this; opaque images are exact.
function rgbOf(rgba) {
  const rgb = new Uint8Array((rgba.length / 4) * 3);
  for (let i = 0, j = 0; i < rgba.length; i += 4, j += 3) {
    const a = rgba[i + 3];
    for (let c = 0; c < 3; c++) {
      const tmp = rgba[i + c] * a * 128 + 255 * (255 - a) * 128 + (0x80 << 7);
      rgb[j + c] = a === 255 ? rgba[i + c] : a === 0 ? 255 : ((((tmp >> 8) + tmp) >> 8) >> 7);
    }
  }
  return rgb;
}

export function toTensor(rgb, w, h, config) {
  const [, , H, W] = config.input_shape;
  const px = resizeRGB(rgb, w, h, W, H);
  const mean = config.mean.map(Math.fround);
  const std = config.std.map(Math.fround);
  const out = new Float32Array(3 * H * W);
  for (let i = 0; i < H * W; i++) {
    for (let c = 0; c < 3; c++) {
      let v = Math.fround(px[i * 3 + c] / 255);
      if (config.normalize) v = Math.fround(Math.fround(v - mean[c]) / std[c]);
      out[c * H * W + i] = v;
    }
  }
  return out;
}

async function decode(blob) {
  const bitmap = await createImageBitmap(blob, {colorSpaceConversion: 'none', premultiplyAlpha: 'none'});
  const canvas = new OffscreenCanvas(bitmap.width, bitmap.height);
  const ctx = canvas.getContext('2d', {colorSpace: 'srgb'});
  ctx.drawImage(bitmap, 0, 0);
  const data = ctx.getImageData(0, 0, bitmap.width, bitmap.height).data;
  return {bitmap, w: bitmap.width, h: bitmap.height, rgb: rgbOf(data)};
}

// ---- the prompt depth (Prompt Depth Anything) ----------------------------------------------------------------
// As depthport.core.prompts reads it: an .npy holds metres, a PNG 16-bit grayscale millimetres; both checked the
// same way (finite, not negative, a range of depths, an .npy not above 100 m).

async function inflate(bytes) {  // a zlib stream (PNG's IDAT) -> its bytes
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('deflate'));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

async function decodePng16(buf) {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const chunks = [];
  let w = 0, h = 0, bits = 0, colour = -1, interlace = 0;
  for (let pos = 8; pos + 8 <= buf.length;) {
    const len = v.getUint32(pos);
    const type = String.fromCharCode(...buf.subarray(pos + 4, pos + 8));
    if (type === 'IHDR') {
      [w, h, bits, colour, interlace] = [v.getUint32(pos + 8), v.getUint32(pos + 12), buf[pos + 16], buf[pos + 17], buf[pos + 20]];
    } else if (type === 'IDAT') chunks.push(buf.subarray(pos + 8, pos + 8 + len));
    else if (type === 'IEND') break;
    pos += 12 + len;
  }
  if (bits !== 16 || colour !== 0 || interlace) {
    throw new Error('a prompt PNG holds 16-bit grayscale millimetres, not interlaced (or give metres in an .npy)');
  }
  const joined = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (joined.set(c, at), at + c.length), 0);
  const raw = await inflate(joined);
  const stride = 2 * w, out = new Float32Array(w * h);
  let prev = new Uint8Array(stride);
  for (let y = 0; y < h; y++) {
    const filter = raw[y * (stride + 1)];
    const line = raw.slice(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let i = 0; i < stride; i++) {  // PNG's five scanline filters, 2 bytes per pixel
      const a = i >= 2 ? line[i - 2] : 0, b = prev[i], c = i >= 2 ? prev[i - 2] : 0;
      const pa = Math.abs(b - c), pb = Math.abs(a - c), pc = Math.abs(a + b - 2 * c);
      const predicted = [0, a, b, (a + b) >> 1, pa <= pb && pa <= pc ? a : pb <= pc ? b : c][filter];
      if (predicted === undefined) throw new Error(`the prompt PNG has an unknown filter ${filter}`);
      line[i] = (line[i] + predicted) & 255;
    }
    for (let x = 0; x < w; x++) out[y * w + x] = ((line[2 * x] << 8) | line[2 * x + 1]) / 1000;
    prev = line;
  }
  return {data: out, h, w, unit: 'mm'};
}

function decodeNpy(buf) {
  const v = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  if (buf[0] !== 0x93 || String.fromCharCode(...buf.subarray(1, 6)) !== 'NUMPY') throw new Error('not an .npy file');
  const start = buf[6] === 1 ? 10 : 12;
  const header = new TextDecoder().decode(buf.subarray(start, start + (buf[6] === 1 ? v.getUint16(8, true) : v.getUint32(8, true))));
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = (/'shape':\s*\(([^)]*)\)/.exec(header)?.[1] ?? '').split(',').map((d) => d.trim()).filter(Boolean).map(Number);
  const Types = {'<f4': Float32Array, '<f8': Float64Array, '<u2': Uint16Array, '|u1': Uint8Array, '<i4': Int32Array};
  if (!Types[descr] || /'fortran_order':\s*True/.test(header)) throw new Error(`the prompt .npy holds ${descr}${/True/.test(header) ? ' in Fortran order' : ''}: give little-endian float32 metres`);
  const dims = shape.filter((d) => d !== 1);
  if (dims.length !== 2) throw new Error(`the prompt .npy has shape [${shape}]: expected a 2-D depth map`);
  const offset = start + header.length;
  const values = new Types[descr](buf.slice(offset, offset + dims[0] * dims[1] * Types[descr].BYTES_PER_ELEMENT).buffer);
  return {data: Float32Array.from(values), h: dims[0], w: dims[1], unit: 'm'};
}

export async function decodePrompt(blob, name) {
  const buf = new Uint8Array(await blob.arrayBuffer());
  const depth = name.toLowerCase().endsWith('.npy') ? decodeNpy(buf) : await decodePng16(buf);
  let lo = Infinity, hi = -Infinity;
  for (const d of depth.data) {
    if (!Number.isFinite(d)) throw new Error(`prompt ${name} has NaN or infinite values: fill them (a prompt is a dense depth map)`);
    if (d < 0) throw new Error(`prompt ${name} has negative depths: a prompt holds distances in metres`);
    lo = Math.min(lo, d); hi = Math.max(hi, d);
  }
  if (hi === lo) throw new Error(`prompt ${name} is ${lo} m everywhere: a prompt needs a range of depths`);
  if (depth.unit === 'm' && hi > 100) throw new Error(`prompt ${name} reaches ${hi}: too far for metres (millimetres?)`);
  return {...depth, name};
}

// The model's (1, 1, h, w) prompt: the depth map as it is when its shape is the model's, else sampled (nearest) to
// it, as the card's snippets sample ARKit's and a ToF camera's depth.
export function promptTensor(depth, config) {
  const [, , H, W] = config.prompt_shape;
  if (depth.h === H && depth.w === W) return Float32Array.from(depth.data);
  const out = new Float32Array(H * W);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) out[y * W + x] = depth.data[Math.floor(y * depth.h / H) * depth.w + Math.floor(x * depth.w / W)];
  }
  return out;
}

// ---- runtimes ------------------------------------------------------------------------------------------------

let liteRtLoading = null;

async function liteRtEngine(config, backend, precision, url) {
  const lrt = await import('./runtime/litert/core.js');
  const threads = self.crossOriginIsolated && await lrt.supportsFeature('threads') && await lrt.supportsFeature('relaxedSimd');
  liteRtLoading ??= lrt.loadLiteRt(new URL('runtime/litert/wasm/', import.meta.url).href, {threads});
  await liteRtLoading;
  const options = backend === 'webgpu' ? {accelerator: 'webgpu', gpuOptions: {precision}} : {accelerator: 'wasm'};
  const model = await lrt.loadAndCompile(url, options);
  const info = {runtime: 'LiteRT.js', requested: backend, accelerator: model.options.accelerator,
    fully_accelerated: model.isFullyAccelerated, precision: backend === 'webgpu' ? precision : 'fp32', threads};
  return {info, async run(tensor, shape, prompt = null) {
    const input = new lrt.Tensor(tensor, shape);
    const extra = prompt && new lrt.Tensor(prompt.data, prompt.shape);
    try {  // a prompted model's signature names its inputs image and prompt
      const out = extra ? Object.values(await model.run({image: input, prompt: extra}))[0] : (await model.run(input))[0];
      const host = await out.moveTo('wasm');
      const data = host.toTypedArray().slice();
      host.delete();
      return data;
    } finally {
      input.delete();
      extra?.delete();
    }
  }};
}

async function ortEngine(config, backend, precision, url) {
  const ort = await import('./runtime/ort/ort.webgpu.bundle.min.mjs');
  ort.env.logLevel = 'warning';
  if (!self.crossOriginIsolated) ort.env.wasm.numThreads = 1;
  const bytes = new Uint8Array(await (await fetch(url)).arrayBuffer());
  // On WebGPU every node must run there: ORT refuses the session rather than move a node to the CPU silently.
  const options = {executionProviders: [backend], logSeverityLevel: 2};
  if (backend === 'webgpu') options.extra = {session: {disable_cpu_ep_fallback: '1'}};
  const session = await ort.InferenceSession.create(bytes, options);
  const info = {runtime: 'onnxruntime-web', requested: backend, accelerator: backend, precision: 'fp32',
    threads: ort.env.wasm.numThreads};
  return {info, async run(tensor, shape, prompt = null) {
    const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', tensor, shape)};
    if (prompt) feeds[session.inputNames[1]] = new ort.Tensor('float32', prompt.data, prompt.shape);
    const out = await session.run(feeds);
    const result = out[session.outputNames[0]];
    const data = (result.location === 'cpu' ? result.data : await result.getData()).slice();
    for (const t of Object.values(out)) t.dispose?.();
    return data;
  }};
}

// The engine for one backend and precision (and model file: `depthport verify` may load a small re-export).
export async function engine(backend, precision = 'fp32', model = null) {
  const config = page.config;
  const key = `${backend}/${precision}/${model ?? config.model_file}`;
  if (!page.engines.has(key)) {
    const make = config.runtime === 'onnxruntime-web' ? ortEngine : liteRtEngine;
    const url = new URL(model ?? config.model_file, location.href).href;
    page.engines.set(key, make(config, backend, precision, url).catch((e) => { page.engines.delete(key); throw e; }));
  }
  return page.engines.get(key);
}

// ``prompt``: {data, shape} for a prompted model (Prompt Depth Anything), else null.
export async function infer(eng, tensor, shape, prompt = null) {
  const t0 = performance.now();
  const depth = await eng.run(tensor, shape, prompt);
  return {depth, ms: performance.now() - t0};
}

// ---- the page ------------------------------------------------------------------------------------------------

function colorize(depth, w, h, lut) {  // 2nd..98th percentile, like depthport.visualize.colorize
  const sorted = Float32Array.from(depth).sort();
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
  const [lo, hi] = [at(0.02), at(0.98)];
  const img = new ImageData(w, h);
  for (let i = 0; i < w * h; i++) {
    const t = Math.min(1, Math.max(0, (depth[i] - lo) / Math.max(hi - lo, 1e-12)));
    const rgb = lut[Math.round(t * (lut.length - 1))];
    img.data.set([...rgb, 255], i * 4);
  }
  return img;
}

const $ = (id) => document.getElementById(id);

function draw(canvas, source, w, h) {
  canvas.width = w;
  canvas.height = h;
  const ctx = canvas.getContext('2d');
  if (source instanceof ImageData) ctx.putImageData(source, 0, 0); else ctx.drawImage(source, 0, 0, w, h);
}

function setStatus(fields) {
  for (const [key, value] of Object.entries(fields)) $(`status-${key}`).textContent = value;
}

// Run the model on one image the way a person does: decode, preprocess, infer, show.
export async function show(blob) {
  const config = page.config;
  const [, , H, W] = config.input_shape;
  setStatus({state: 'running…'});
  try {
    const img = await decode(blob);
    page.image = blob;
    draw($('input'), img.bitmap, img.w, img.h);
    const eng = await engine(page.backend, page.precision);
    if (config.prompt_shape && !page.prompt) throw new Error('choose a prompt depth map (.npy metres or 16-bit PNG millimetres)');
    const prompt = config.prompt_shape ? {data: promptTensor(page.prompt, config), shape: config.prompt_shape} : null;
    const {depth, ms} = await infer(eng, toTensor(img.rgb, img.w, img.h, config), config.input_shape, prompt);
    draw($('depth'), colorize(depth, W, H, config.lut), W, H);
    const gpu = eng.info.accelerator === 'webgpu' ? ` (${page.gpu ?? 'adapter unknown'})` : ` (${eng.info.threads ? 'threaded' : '1 thread'})`;
    setStatus({state: 'done', backend: eng.info.accelerator + gpu, precision: eng.info.precision, ms: `${ms.toFixed(1)} ms`});
    return {ms, info: eng.info};
  } catch (e) {
    setStatus({state: `error: ${e.message ?? e}`});
    throw e;
  }
}

async function gpuAdapter() {
  if (!navigator.gpu) return null;
  const adapter = await navigator.gpu.requestAdapter().catch(() => null);
  if (!adapter) return null;
  const info = adapter.info ?? {};
  return [info.vendor, info.architecture, info.description].filter(Boolean).join(' ') || 'WebGPU adapter';
}

async function bundled() {
  return (await fetch(page.config.image)).blob();
}

async function bundledPrompt() {
  return decodePrompt(await (await fetch(page.config.prompt)).blob(), page.config.prompt);
}

async function choosePrompt(file) {
  try {
    page.prompt = await decodePrompt(file, file.name);
    const [, , H, W] = page.config.prompt_shape;
    setStatus({prompt: `${file.name}: ${page.prompt.h}x${page.prompt.w}${page.prompt.h === H && page.prompt.w === W ? '' : ` sampled (nearest) to ${H}x${W}`}, ${page.prompt.unit === 'mm' ? 'millimetres' : 'metres'}`});
    if (page.image) await show(page.image);
  } catch (e) {
    setStatus({state: `error: ${e.message ?? e}`});
  }
}

function wire() {
  $('file').addEventListener('change', (e) => e.target.files[0] && show(e.target.files[0]));
  $('prompt-file').addEventListener('change', (e) => e.target.files[0] && choosePrompt(e.target.files[0]));
  for (const radio of document.querySelectorAll('input[name=backend]')) {
    radio.addEventListener('change', () => { page.backend = radio.value; page.image && show(page.image); });
  }
  $('precision').addEventListener('change', (e) => { page.precision = e.target.value; page.image && show(page.image); });
}

async function main() {
  const config = page.config = await (await fetch('depthport-web.json')).json();
  const params = new URLSearchParams(location.search);
  page.gpu = await gpuAdapter();
  page.backend = params.get('backend') ?? (page.gpu ? 'webgpu' : 'wasm');
  page.precision = params.get('precision') ?? 'fp32';
  document.title = `${config.model}: depth in the browser`;
  $('title').textContent = `${config.model} (${config.input_shape[2]}x${config.input_shape[3]}) in the browser`;
  $('banner').hidden = !config.random_weights;
  $('webgpu').disabled = !page.gpu;
  $('webgpu-note').textContent = page.gpu ? `adapter: ${page.gpu}` : 'this browser has no WebGPU adapter';
  $(page.backend).checked = true;
  $('precision').value = page.precision;
  $('precision').disabled = config.runtime === 'onnxruntime-web';
  setStatus({runtime: `${config.runtime} ${config.runtime_version}`, model: config.model_file, state: 'ready'});
  $('prompt-controls').hidden = !config.prompt_shape;
  $('status-prompt-row').hidden = !config.prompt_shape;
  if (config.prompt_shape) {
    page.prompt = await bundledPrompt();
    setStatus({prompt: `${config.prompt} (bundled example, metres), model input ${config.prompt_shape[2]}x${config.prompt_shape[3]}`});
  }
  wire();
  if (params.get('autorun') !== '0') await show(await bundled());
}

window.depthport = {page, engine, infer, show, toTensor, decode, decodePrompt, promptTensor, bundled, ready: main()};
