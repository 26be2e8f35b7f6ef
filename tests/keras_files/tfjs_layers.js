// TF.js 4.22 (node, CPU backend) as the oracle of the TF.js layers-model tests:
// `node tfjs_layers.js OUT` saves a Sequential CNN and a two-input two-output model
// with a shared layer as OUT/<name>/model.json + weights.bin (what model.save()
// writes), with deterministic weights, and OUT/<name>/io.json: the inputs and TF.js's
// outputs. `node tfjs_layers.js names DIR` loads DIR/model.json as a fresh process does
// and prints {inputs, outputs}: the names TF.js's LayersModel reports (model.inputs[i].name,
// model.outputs[i].name). NODE_PATH must reach @tensorflow/tfjs.
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

function values(n, k) {                 // deterministic numbers in [-0.5, 0.5)
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sin(1.7 * i + k) * 0.5;
  return out;
}

function seeded(model) {
  model.setWeights(model.weights.map((w, k) => {
    const v = values(w.shape.reduce((a, b) => a * b, 1), k);
    if (w.name.includes('moving_variance')) v.forEach((x, i) => { v[i] = 1 + Math.abs(x); });
    return tf.tensor(v, w.shape);
  }));
}

function cnn() {
  return tf.sequential({layers: [
    tf.layers.conv2d({inputShape: [8, 8, 3], filters: 4, kernelSize: 3, padding: 'same',
                      activation: 'relu'}),
    tf.layers.batchNormalization(),
    tf.layers.maxPooling2d({poolSize: 2}),
    tf.layers.flatten(),
    tf.layers.dense({units: 3, activation: 'softmax'})]});
}

function twoIo() {
  const a = tf.input({shape: [4], name: 'a'});
  const b = tf.input({shape: [4], name: 'b'});
  const shared = tf.layers.dense({units: 5, activation: 'tanh', name: 'shared'});
  const o1 = tf.layers.dense({units: 2, name: 'o1'}).apply(shared.apply(a));
  const o2 = tf.layers.dense({units: 3, activation: 'sigmoid', name: 'o2'})
      .apply(shared.apply(b));
  return tf.model({inputs: [a, b], outputs: [o1, o2]});
}

async function save(model, dir, inputs) {
  fs.mkdirSync(dir, {recursive: true});
  await model.save(tf.io.withSaveHandler(async (art) => {
    fs.writeFileSync(path.join(dir, 'weights.bin'), Buffer.from(art.weightData));
    fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify({
      format: 'layers-model', generatedBy: 'TensorFlow.js tfjs-layers v4.22.0',
      convertedBy: null, modelTopology: art.modelTopology,
      weightsManifest: [{paths: ['weights.bin'], weights: art.weightSpecs}]}));
    return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
  }));
  const xs = inputs.map(([shape, k]) => tf.tensor(values(shape.reduce((a, b) => a * b, 1), k),
                                                  shape));
  let ys = model.predict(xs.length === 1 ? xs[0] : xs);
  ys = Array.isArray(ys) ? ys : [ys];
  const io = {inputs: await Promise.all(xs.map(async x => ({shape: x.shape,
                                                           data: Array.from(await x.data())}))),
              outputs: await Promise.all(ys.map(async y => ({shape: y.shape,
                                                            data: Array.from(await y.data())})))};
  fs.writeFileSync(path.join(dir, 'io.json'), JSON.stringify(io));
}

async function names(dir) {
  const json = JSON.parse(fs.readFileSync(path.join(dir, 'model.json')));
  const bin = fs.readFileSync(path.join(dir, json.weightsManifest[0].paths[0]));
  const model = await tf.loadLayersModel(tf.io.fromMemory({
    modelTopology: json.modelTopology, weightSpecs: json.weightsManifest[0].weights,
    weightData: bin.buffer.slice(bin.byteOffset, bin.byteOffset + bin.length)}));
  process.stdout.write(JSON.stringify({inputs: model.inputs.map(t => t.name),
                                       outputs: model.outputs.map(t => t.name)}));
}

(async () => {
  await tf.setBackend('cpu');
  if (process.argv[2] === 'names') return names(process.argv[3]);
  const out = process.argv[2];
  const m1 = cnn(); seeded(m1);
  await save(m1, path.join(out, 'cnn'), [[[5, 8, 8, 3], 11]]);
  const m2 = twoIo(); seeded(m2);
  await save(m2, path.join(out, 'two_io'), [[[6, 4], 21], [[6, 4], 22]]);
})().catch(err => { console.error(err); process.exit(1); });
