// Added by `depthport verify` before the page's own scripts (never part of the page a person gets): what the
// Python driver calls. Images go in as PNG bytes and through the page's own decode and preprocessing; a prompted
// model's prompt goes in as the model's (1, 1, h, w) float32; tensors and depth maps come back as base64 float32
// (little-endian).
self.__depthportDriver = (() => {
  const b64 = (typed) => {
    const bytes = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
    let text = '';
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
    return btoa(text);
  };
  const fromB64 = (text) => Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const page = async () => { await window.depthport.ready; return window.depthport; };
  let last = null;
  return {
    async select(backend, precision, model) {
      const d = await page();
      self.__depthportGpu?.reset();
      return (await d.engine(backend, precision, model)).info;
    },
    async inferPng(backend, precision, model, png, shape, prompt, promptShape) {
      const d = await page();
      const eng = await d.engine(backend, precision, model);
      const img = await d.decode(new Blob([fromB64(png)], {type: 'image/png'}));
      const tensor = d.toTensor(img.rgb, img.w, img.h, {...d.page.config, input_shape: shape});
      const extra = prompt ? {data: new Float32Array(fromB64(prompt).buffer), shape: promptShape} : null;
      const {depth, ms} = await d.infer(eng, tensor, shape, extra);
      last = {tensor, shape, extra};
      return {tensor: b64(tensor), depth: b64(depth), ms};
    },
    async time(backend, precision, model, calls) {  // more calls on the last input, for the time per inference
      const d = await page();
      const eng = await d.engine(backend, precision, model);
      const ms = [];
      for (let i = 0; i < calls; i++) ms.push((await d.infer(eng, last.tensor, last.shape, last.extra)).ms);
      return ms;
    },
    async tensorOf(png, shape) {  // the page's preprocessing alone
      const d = await page();
      const img = await d.decode(new Blob([fromB64(png)], {type: 'image/png'}));
      return b64(d.toTensor(img.rgb, img.w, img.h, {...d.page.config, input_shape: shape}));
    },
    async promptOf(bytes, name) {  // the page's reading of a prompt file and its (1, 1, h, w) input, in metres
      const d = await page();
      const depth = await d.decodePrompt(new Blob([fromB64(bytes)]), name);
      return {depth: b64(depth.data), h: depth.h, w: depth.w, input: b64(d.promptTensor(depth, d.page.config))};
    },
    async showBundled(backend, precision) {
      const d = await page();
      d.page.backend = backend;
      d.page.precision = precision;
      document.getElementById(backend).checked = true;
      document.getElementById('precision').value = precision;
      return d.show(await d.bundled());
    },
    gpu() {
      const g = self.__depthportGpu;
      return g ? {devices: g.devices, shaders: g.shaders, submits: g.submits, dispatches: g.dispatches,
        pipelines: g.pipelines} : null;
    },
  };
})();
