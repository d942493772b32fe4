// Added by `depthport verify` before the page's own scripts (never part of the page a person gets): counts what the
// page asks of WebGPU, so the report can say whether a run used the GPU and what precision its shaders compute in.
// - devices: the features each requestDevice asked for and the adapter granted (no 'shader-f16': no f16 arithmetic);
// - shaders: every WGSL module, flagged when it enables f16 (`enable f16;`), declares f16 values, or packs / unpacks
//   f32 <-> f16 (pack2x16float / unpack2x16float: FP16 storage with FP32 arithmetic);
// - submits and dispatches: command buffers and compute dispatches sent to the GPU queue.
(() => {
  if (!self.GPUDevice) return;
  const gpu = self.__depthportGpu = {devices: [], shaders: [], submits: 0, dispatches: 0, pipelines: 0, compile_ms: 0};
  gpu.reset = () => Object.assign(gpu, {shaders: [], submits: 0, dispatches: 0, pipelines: 0, compile_ms: 0});
  const wrap = (proto, name, after) => {
    const original = proto[name];
    proto[name] = function (...args) { const result = original.apply(this, args); after(args, result, this); return result; };
  };
  wrap(GPUAdapter.prototype, 'requestDevice', ([descriptor], promise, adapter) => {
    promise.then((device) => gpu.devices.push({
      adapter: [adapter.info?.vendor, adapter.info?.architecture].filter(Boolean).join(' '),
      adapter_features: [...adapter.features], requested: [...(descriptor?.requiredFeatures ?? [])],
      granted: [...device.features]}), () => {});
  });
  wrap(GPUDevice.prototype, 'createShaderModule', ([descriptor]) => {
    const code = String(descriptor?.code ?? '');
    gpu.shaders.push({enable_f16: /\benable\s+f16\s*;/.test(code), f16_values: /\bf16\b|vec[234]h\b|mat\dx\dh\b/.test(code.replace(/\benable\s+f16\s*;/g, '')),
      pack: /\bpack2x16float\b/.test(code), unpack: /\bunpack2x16float\b/.test(code), chars: code.length});
  });
  for (const name of ['createComputePipeline', 'createComputePipelineAsync']) {
    const original = GPUDevice.prototype[name];
    GPUDevice.prototype[name] = function (...args) {
      const t0 = performance.now();
      const done = () => { gpu.pipelines += 1; gpu.compile_ms += performance.now() - t0; };
      const result = original.apply(this, args);
      if (result instanceof Promise) result.then(done, () => {}); else done();
      return result;
    };
  }
  wrap(GPUQueue.prototype, 'submit', ([buffers]) => { gpu.submits += buffers?.length ?? 0; });
  for (const name of ['dispatchWorkgroups', 'dispatchWorkgroupsIndirect']) {
    wrap(GPUComputePassEncoder.prototype, name, () => { gpu.dispatches += 1; });
  }
})();
