'use strict'
// A disk with a volatile write cache, for powercut.test.js: a FUSE file system (spoken directly
// over /dev/fuse, no library) that serves one file, `disk`, to be the backing file of a loop
// device. The loop driver turns the block layer's cache flushes (REQ_PREFLUSH, and FUA writes,
// which it emulates with flushes) into fsync(2) of this file, which reaches this process as
// FUSE_FSYNC. So:
//   - every write is applied to the disk's contents at once (what reads see: the drive's cache);
//   - a write becomes durable only at the next FSYNC, when the writes pending since the previous
//     one are applied to the durable image (what the platters hold).
// On `cut` (a line on stdin), or with `cut <n>` right after the n-th write from then on, the
// durable image and the writes still pending are frozen: that is the power cut. From then on
// every write and flush fails (EIO), so no fsync can succeed after the cut, as none could on a
// machine without power; reads are still served. `save <file> [<seed>]` writes the frozen
// durable image to a file; with a seed, also a random subset of the pending writes, in 4 KiB
// pieces, applied in the order they were written: what a drive may have put on its platters
// before the power went, in any order, since the last flush.
//
// argv: mountpoint imageFile. Prints `ready` once mounted, `cut <flushes> <pendingWrites>
// <pendingBytes>` at the cut and `saved <file> <pieces kept>/<pieces>` in answer to the commands; exits when
// the file system is unmounted.

const fs = require('node:fs')
const { spawnSync } = require('node:child_process')
const readline = require('node:readline')
const { mulberry32 } = require('./seeded')

const [mountpoint, imageFile] = process.argv.slice(2)

// What the drive holds: `cache` (reads and writes), `durable` (survives a power cut).
const cache = fs.readFileSync(imageFile)
let durable = Buffer.from(cache)
let pending = [] // [{ off, data }] written since the last flush, in order
let flushes = 0
let frozen = null // { durable, pending } at the cut
let cutAfterWrites = 0 // > 0: cut right after that many more writes

const out = (line) => fs.writeSync(1, `${line}\n`)

// Opcodes and errors of the FUSE protocol (include/uapi/linux/fuse.h).
const OP = {
  LOOKUP: 1, FORGET: 2, GETATTR: 3, SETATTR: 4, OPEN: 14, READ: 15, WRITE: 16, STATFS: 17,
  RELEASE: 18, FSYNC: 20, FLUSH: 25, INIT: 26, OPENDIR: 27, READDIR: 28, RELEASEDIR: 29,
  FSYNCDIR: 30, ACCESS: 34, INTERRUPT: 36, DESTROY: 38, BATCH_FORGET: 42,
}
const ENOENT = 2
const EIO = 5
const ENOSYS = 38
const ROOT = 1
const DISK = 2
const BIG_WRITES = 1 << 5

const dev = fs.openSync('/dev/fuse', 'r+')
// -i: mount(2) itself, never a /sbin/mount.fuse helper (fuse3's would read the options otherwise)
const mounted = spawnSync('mount', ['-i', '-t', 'fuse', '-o', `fd=3,rootmode=40000,user_id=0,group_id=0`, 'threadline-powercut', mountpoint], {
  stdio: ['ignore', 'inherit', 'inherit', dev],
})
if (mounted.status !== 0) {
  process.stderr.write(`powercut-disk: mount -t fuse failed (status ${mounted.status})\n`)
  process.exit(1)
}

function attr(node) {
  const b = Buffer.alloc(88)
  const now = BigInt(Math.floor(Date.now() / 1000))
  const size = node === DISK ? cache.length : 0
  b.writeBigUInt64LE(BigInt(node), 0) // ino
  b.writeBigUInt64LE(BigInt(size), 8)
  b.writeBigUInt64LE(BigInt(Math.ceil(size / 512)), 16) // blocks
  b.writeBigUInt64LE(now, 24)
  b.writeBigUInt64LE(now, 32)
  b.writeBigUInt64LE(now, 40)
  b.writeUInt32LE(node === DISK ? 0o100600 : 0o40700, 60) // mode
  b.writeUInt32LE(node === DISK ? 1 : 2, 64) // nlink
  b.writeUInt32LE(4096, 80) // blksize
  return b
}

function attrOut(node) {
  const head = Buffer.alloc(16)
  head.writeBigUInt64LE(0n, 0) // attr_valid: 0 s, ask again each time
  return Buffer.concat([head, attr(node)])
}

function reply(unique, error, body = Buffer.alloc(0)) {
  const head = Buffer.alloc(16)
  head.writeUInt32LE(16 + body.length, 0)
  head.writeInt32LE(-error, 4)
  head.writeBigUInt64LE(unique, 8)
  fs.writeSync(dev, body.length ? Buffer.concat([head, body]) : head)
}

function flush() {
  for (const w of pending) w.data.copy(durable, w.off)
  pending = []
  flushes++
}

function handle(req) {
  const opcode = req.readUInt32LE(4)
  const unique = req.readBigUInt64LE(8)
  const node = Number(req.readBigUInt64LE(16))
  const arg = req.subarray(40)
  switch (opcode) {
    case OP.INIT: {
      const flags = arg.readUInt32LE(12)
      const b = Buffer.alloc(64)
      b.writeUInt32LE(7, 0) // major
      b.writeUInt32LE(31, 4) // minor
      b.writeUInt32LE(arg.readUInt32LE(8), 8) // max_readahead
      b.writeUInt32LE(flags & BIG_WRITES, 12)
      b.writeUInt16LE(16, 16) // max_background
      b.writeUInt16LE(12, 18) // congestion_threshold
      b.writeUInt32LE(128 * 1024, 20) // max_write
      b.writeUInt32LE(1, 24) // time_gran
      return reply(unique, 0, b)
    }
    case OP.LOOKUP: {
      const name = arg.subarray(0, arg.indexOf(0)).toString()
      if (node !== ROOT || name !== 'disk') return reply(unique, ENOENT)
      const head = Buffer.alloc(40)
      head.writeBigUInt64LE(BigInt(DISK), 0)
      return reply(unique, 0, Buffer.concat([head, attr(DISK)]))
    }
    case OP.GETATTR:
    case OP.SETATTR: // only size/times could be asked; the disk keeps its size
      return reply(unique, 0, attrOut(node))
    case OP.OPEN:
    case OP.OPENDIR:
      return reply(unique, 0, Buffer.alloc(16))
    case OP.READ: {
      const off = Number(arg.readBigUInt64LE(8))
      const size = arg.readUInt32LE(16)
      return reply(unique, 0, Buffer.from(cache.subarray(off, Math.min(off + size, cache.length))))
    }
    case OP.WRITE: {
      if (frozen) return reply(unique, EIO)
      const off = Number(arg.readBigUInt64LE(8))
      const size = arg.readUInt32LE(16)
      if (off + size > cache.length) return reply(unique, EIO)
      const data = Buffer.from(arg.subarray(40, 40 + size))
      data.copy(cache, off)
      pending.push({ off, data })
      const b = Buffer.alloc(8)
      b.writeUInt32LE(size, 0)
      reply(unique, 0, b)
      if (cutAfterWrites > 0 && --cutAfterWrites === 0) cut()
      return
    }
    case OP.FSYNC:
      if (frozen) return reply(unique, EIO)
      flush()
      return reply(unique, 0)
    case OP.STATFS: {
      const b = Buffer.alloc(80)
      b.writeBigUInt64LE(BigInt(cache.length / 4096), 0)
      b.writeUInt32LE(4096, 40) // bsize
      b.writeUInt32LE(255, 44) // namelen
      b.writeUInt32LE(4096, 48) // frsize
      return reply(unique, 0, b)
    }
    case OP.READDIR:
      return reply(unique, 0) // empty: the file is found by name
    case OP.FLUSH:
    case OP.RELEASE:
    case OP.RELEASEDIR:
    case OP.FSYNCDIR:
    case OP.ACCESS:
    case OP.DESTROY:
      return reply(unique, 0)
    case OP.FORGET:
    case OP.BATCH_FORGET:
    case OP.INTERRUPT:
      return // no reply
    default:
      return reply(unique, ENOSYS)
  }
}

// Requests are read on the thread pool so that stdin (the commands) is served meanwhile.
const buf = Buffer.alloc(1 << 20)
function next() {
  fs.read(dev, buf, 0, buf.length, null, (err, n) => {
    if (err) {
      if (err.code === 'EINTR' || err.code === 'EAGAIN' || err.code === 'ENOENT') return next()
      if (err.code !== 'ENODEV') process.stderr.write(`powercut-disk: ${err.message}\n`)
      process.exit(0) // ENODEV: unmounted
    }
    handle(buf.subarray(0, n))
    next()
  })
}
next()
out('ready')

function cut() {
  // `durable` and `pending` change no more: every write and flush fails from now on.
  frozen = { durable, pending }
  const bytes = pending.reduce((sum, w) => sum + w.data.length, 0)
  out(`cut ${flushes} ${pending.length} ${bytes}`)
}

// Writes `image` to `file`, skipping the MiB that are all zeros (most of a fresh file system), so
// the file is sparse and quick to write.
function writeSparse(file, image) {
  const fd = fs.openSync(file, 'w')
  try {
    fs.ftruncateSync(fd, image.length)
    const zeros = Buffer.alloc(1 << 20)
    for (let at = 0; at < image.length; at += zeros.length) {
      const chunk = image.subarray(at, at + zeros.length)
      if (!chunk.equals(zeros.subarray(0, chunk.length))) fs.writeSync(fd, chunk, 0, chunk.length, at)
    }
  } finally {
    fs.closeSync(fd)
  }
}

readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const [cmd, file, seed] = line.split(' ')
  if (cmd === 'cut') {
    const after = Number(file || 0)
    if (after > 0) cutAfterWrites = after
    else cut()
  } else if (cmd === 'save') {
    writeSparse(file, frozen.durable)
    let kept = 0
    let pieces = 0
    if (seed !== undefined) {
      const random = mulberry32(Number(seed))
      const fd = fs.openSync(file, 'r+')
      for (const w of frozen.pending) {
        for (let at = 0; at < w.data.length; at += 4096) {
          pieces++
          if (random() < 0.5) continue
          kept++
          const end = Math.min(at + 4096, w.data.length)
          fs.writeSync(fd, w.data, at, end - at, w.off + at)
        }
      }
      fs.closeSync(fd)
    }
    out(`saved ${file} ${kept}/${pieces}`)
  }
})
