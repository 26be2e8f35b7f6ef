// The oracle of tests/tfjs: TF.js 4.22 (pure-JS CPU backend) in node runs a graph model
// (tf.loadGraphModel, executeAsync) or a layers model (tf.loadLayersModel, predict).
//   node tfjs_reference.js info MODEL_JSON            -> JSON: inputs, outputs, node names
//   node tfjs_reference.js run MODEL_JSON FEEDS OUT [SETUP]  -> runs on FEEDS, writes OUT
//   node tfjs_reference.js many LIST                  -> LIST: JSON [[MODEL_JSON, FEEDS,
//                                                        OUT, SETUP?], ...]: one node for many
// SETUP: a module whose default export's setup(tf) registers the custom layer classes a
// layers model names, as the npm package that ships the model does for its users
// (UpscalerJS's model definitions); the module is the package's own code.
// FEEDS: JSON {name: {dtype, shape, file}} with raw little-endian float32/int32 files;
// OUT: JSON {outputs: [{name, dtype, shape, file}]} with raw files beside it.
// Needs NODE_PATH holding @tensorflow/tfjs (the Makefile installs it into a cache).
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

async function loadModel(file, setup) {
  if (setup) {
    const definition = require(setup);
    (definition.default || definition).setup(tf);
  }
  const json = JSON.parse(fs.readFileSync(file, 'utf8'));
  const dir = path.dirname(file);
  const specs = [];
  const buffers = [];
  for (const group of json.weightsManifest || []) {
    for (const w of group.weights) specs.push(w);
    for (const p of group.paths) {
      const b = fs.readFileSync(path.join(dir, p));
      buffers.push(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    }
  }
  const handler = tf.io.fromMemory({
    modelTopology: json.modelTopology, format: json.format, signature: json.signature,
    userDefinedMetadata: json.userDefinedMetadata, weightSpecs: specs,
    weightData: buffers.length === 1 ? buffers[0] : buffers,
  });
  if (json.format === 'layers-model') {
    const model = await tf.loadLayersModel(handler);
    model.layersModel = true;
    return model;
  }
  return tf.loadGraphModel(handler);
}

async function main() {
  await tf.setBackend('cpu');
  const [mode, file, feedsFile, outFile] = process.argv.slice(2);
  if (mode === 'many') {
    const list = JSON.parse(fs.readFileSync(file, 'utf8'));
    for (const [m, f, o, setup] of list) {
      try {
        await runOne(await loadModel(m, setup), f, o);
      } catch (err) {
        fs.writeFileSync(o, JSON.stringify({error: String(err && err.message || err)}));
      }
    }
    return;
  }
  const model = await loadModel(file, process.argv[6]);
  if (mode === 'info') {
    process.stdout.write(JSON.stringify({
      inputs: model.inputs, outputs: model.outputs,
      inputNodes: model.inputNodes, outputNodes: model.outputNodes,
    }));
    return;
  }
  await runOne(model, feedsFile, outFile);
}

async function runOne(model, feedsFile, outFile) {
  const feeds = JSON.parse(fs.readFileSync(feedsFile, 'utf8'));
  const dir = path.dirname(feedsFile);
  const inputs = {};
  for (const [name, f] of Object.entries(feeds)) {
    const b = fs.readFileSync(path.join(dir, f.file));
    const ab = b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength);
    const data = f.dtype === 'int32' ? new Int32Array(ab) : new Float32Array(ab);
    inputs[name] = tf.tensor(data, f.shape, f.dtype);
  }
  // a layers model takes its inputs in the order the feeds list them (TF.js renames a
  // layers model's tensors when a process loads several: names cannot key them)
  let outs = model.layersModel ? model.predict(Object.values(inputs))
      : await model.executeAsync(inputs);
  if (!Array.isArray(outs)) outs = [outs];
  const result = {outputs: []};
  const outDir = path.dirname(outFile);
  for (let i = 0; i < outs.length; i++) {
    const t = outs[i];
    const data = await t.data();
    const name = `out${i}.bin`;
    // TF.js 4.22 can hand back a float32 tensor holding an Int32Array (handtrack's
    // num_detections, cast from TensorList results): its values are what it means
    const typed = t.dtype === 'bool' ? Int32Array.from(data)
        : t.dtype === 'float32' && !(data instanceof Float32Array) ? Float32Array.from(data)
        : data;
    fs.writeFileSync(path.join(outDir, name), Buffer.from(typed.buffer, typed.byteOffset,
                                                          typed.byteLength));
    result.outputs.push({name: model.outputs[i] ? model.outputs[i].name : String(i),
                         dtype: t.dtype === 'bool' ? 'int32' : t.dtype, shape: t.shape,
                         file: name});
  }
  fs.writeFileSync(outFile, JSON.stringify(result));
}

main().catch((err) => { process.stderr.write(String(err && err.stack || err) + '\n');
                        process.exit(1); });
