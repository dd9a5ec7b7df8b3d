'use strict'
// Small helpers shared by the tests, their child processes and bench/wal.js (no library import,
// so a child can load it before the store).

// mulberry32: a small seeded generator (floats in [0, 1)), so a run is reproducible from its seed.
function mulberry32(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Writes a line to stdout synchronously, whole, before the next append: a child killed right
// after has acknowledged exactly what its parent read (a pipe may answer EAGAIN; retry).
function writeLine(line) {
  const fs = require('node:fs')
  const buf = Buffer.from(line + '\n')
  let off = 0
  while (off < buf.length) {
    try {
      off += fs.writeSync(1, buf, off)
    } catch (e) {
      if (e.code !== 'EAGAIN') throw e
    }
  }
}

module.exports = { mulberry32, writeLine }
