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
const page = {config: null, engines: new Map(), backend: null, precision: 'fp32', image: null, gpu: null};

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
  return {info, async run(tensor, shape) {
    const input = new lrt.Tensor(tensor, shape);
    try {
      const [out] = await model.run(input);
      const host = await out.moveTo('wasm');
      const data = host.toTypedArray().slice();
      host.delete();
      return data;
    } finally {
      input.delete();
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
  return {info, async run(tensor, shape) {
    const feeds = {[session.inputNames[0]]: new ort.Tensor('float32', tensor, shape)};
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

export async function infer(eng, tensor, shape) {
  const t0 = performance.now();
  const depth = await eng.run(tensor, shape);
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
    const {depth, ms} = await infer(eng, toTensor(img.rgb, img.w, img.h, config), config.input_shape);
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

function wire() {
  $('file').addEventListener('change', (e) => e.target.files[0] && show(e.target.files[0]));
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
  wire();
  if (params.get('autorun') !== '0') await show(await bundled());
}

window.depthport = {page, engine, infer, show, toTensor, decode, bundled, ready: main()};
