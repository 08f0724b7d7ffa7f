// node bench/base64.mjs: the decoder's time for one stdout frame of 64 KiB
// (and 256 KiB), random bytes, median of many runs, in CPU time (the
// machine may be shared). FRAMES=path/to/frames.js measures another build.
const { decode, encode } = await import(process.env.FRAMES ?? "../dist/index.js");

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
for (const size of [64 << 10, 256 << 10]) {
  const data = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) globalThis.crypto.getRandomValues(data.subarray(i, Math.min(size, i + 65536)));
  const line = new TextEncoder().encode(encode({ type: "stdout", off: 0, data }));
  for (let i = 0; i < 200; i++) decode(line, 1 << 20); // warm up
  const xs = [];
  for (let r = 0; r < 30; r++) {
    const t0 = process.cpuUsage();
    for (let i = 0; i < 20; i++) decode(line, 1 << 20);
    const t = process.cpuUsage(t0);
    xs.push((t.user + t.system) / 20);
  }
  console.log(`decode of a ${size >> 10} KiB stdout frame: ${median(xs).toFixed(1)} µs (median of 30×20, CPU time)`);
}
