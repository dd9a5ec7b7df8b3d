'use strict'
// Power loss, simulated in the kernel: a writer appends to a store on an ext4 file system whose
// disk has a volatile write cache, and the power is cut at a random moment. The store is then
// opened from what the disk had made durable, as after a reboot.
//
// The disk: ext4 on a loop device whose backing file is served by helpers/powercut-disk.js, a
// FUSE file system that applies each write at once but makes it durable only at the next fsync of
// the file, which is what the loop driver does for every cache flush the block layer sends it
// (ext4's journal commits, so SQLite's fsyncs). At the cut the durable image is frozen, and from
// then on every write and flush fails: nothing can be acknowledged after it. The writer is
// SIGKILLed, the file systems unmounted, and the image mounted again (ext4 replays its journal)
// from (a) only what was flushed, and (b) that plus a random half of the 4 KiB pieces written
// since the last flush, as a drive may have written some of its cache, in any order, before the
// power went. The file system must come back clean (`e2fsck -fn`), which checks the model.
//
// - `durability: 'power'`: the cut comes right after one of the block writes (1 to 40 of them
//   after a random delay) while the writer runs, so between a write and its flush, in the middle
//   of a journal commit or of SQLite's writes. Every line the writer printed was acknowledged
//   before the cut (each append fsyncs, and no fsync succeeds after it). Checked: the store opens,
//   `verify()` is ok, the three sessions exist, and each holds every acknowledged append, in the
//   order acknowledged, batches whole; past them at most the one append in flight, whole.
// - `durability: 'process'` (the default) does not flush appends (only checkpoints do), so it may
//   lose what was acknowledged since: the writer is stopped (SIGSTOP) before the cut, so that what
//   it printed is known to precede it. Checked: the store opens, `verify()` is ok, and each session
//   holds a prefix of what was acknowledged to it (possibly nothing, or no session at all),
//   batches whole, nothing reordered. What it lost is reported (t.diagnostic).
//
// Device-mapper (dm-flakey, dm-log-writes) would be the usual tool; the kernel here has no
// device-mapper and loads no modules, but has loop devices and FUSE. Mounting needs root (CI and
// the dev machine run the tests as root): without it these tests fail at the mount, they are not
// skipped. THREADLINE_POWERCUT_SEED=<n> runs one cut of each kind with that seed; for 'process',
// THREADLINE_POWERCUT_PACE_MS (the writer's pause between appends) and THREADLINE_POWERCUT_RUN_MS
// (how long it runs before the cut) measure a slower writer (docs/recovery.md).

const { test } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const readline = require('node:readline')
const { execFileSync, spawn } = require('node:child_process')
const { once } = require('node:events')
const { setTimeout: sleep } = require('node:timers/promises')

const { mulberry32 } = require('./helpers/seeded')
const { lib } = require('./helpers/util')

const { Store } = lib
const DISK = path.join(__dirname, 'helpers', 'powercut-disk.js')
const WRITER = path.join(__dirname, 'helpers', 'powercut-writer.js')
const DISK_MIB = 128

function run(cmd, args) {
  try {
    return execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' })
  } catch (e) {
    const err = new Error(`${cmd} ${args.join(' ')} failed (status ${e.status}): ${(e.stderr || e.message).trim()}\n${e.stdout || ''}`)
    err.status = e.status
    throw err
  }
}

function tryRun(cmd, args) {
  try {
    run(cmd, args)
  } catch {}
}

// umount, tried again for a while if the file system is busy (a loop device just detached may
// hold its backing file a moment longer).
async function umount(target) {
  for (let i = 0; ; i++) {
    try {
      return run('umount', [target])
    } catch (e) {
      if (i === 100 || !/busy/i.test(e.message)) throw e
      await sleep(20)
    }
  }
}

async function waitFor(cond, ms, what) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(2)
  }
}

// Lines of a child's stdout, and a way to wait for one that starts with a prefix (failing at once
// if the child exits).
function lines(child) {
  const stream = child.stdout
  const got = []
  let wake = () => {}
  readline.createInterface({ input: stream }).on('line', (l) => {
    got.push(l)
    wake()
  })
  return {
    got,
    async next(prefix, ms, what) {
      const end = Date.now() + ms
      for (;;) {
        const i = got.findIndex((l) => l.startsWith(prefix))
        if (i >= 0) return got.splice(i, 1)[0]
        if (child.exitCode !== null || child.signalCode !== null) throw new Error(`${what} exited (${child.exitCode ?? child.signalCode})`)
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
        await Promise.race([new Promise((r) => { wake = r }), sleep(50)])
      }
    },
  }
}

// Every thread of `pid` stopped (SIGSTOP takes effect as each thread returns to user space: an
// fsync in progress completes first).
function stopped(pid) {
  try {
    return fs.readdirSync(`/proc/${pid}/task`).every((tid) => {
      const stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
      return 'tT'.includes(stat.slice(stat.lastIndexOf(')') + 2)[0])
    })
  } catch {
    return false
  }
}

// One power cut: a fresh ext4 file system on the FUSE-backed loop device, the writer run until
// `delayMs` after it is ready, then the cut. Returns what was acknowledged and the disk images.
async function powerCut(t, { durability, seed, delayMs, stopFirst, afterWrites = 0, paceMs = 0 }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'threadline-powercut-'))
  const fuse = path.join(dir, 'fuse')
  const mnt = path.join(dir, 'mnt')
  fs.mkdirSync(fuse)
  fs.mkdirSync(mnt)
  const image = path.join(dir, 'fresh.img')
  fs.closeSync(fs.openSync(image, 'w'))
  fs.truncateSync(image, DISK_MIB << 20)
  // Initialized in full now, so that no lazy initialization writes during the run.
  run('mkfs.ext4', ['-q', '-F', '-E', 'lazy_itable_init=0,lazy_journal_init=0', image])

  let disk = null
  let writer = null
  let loop = null
  let mounted = []
  const cleanup = () => {
    if (writer && writer.exitCode === null && writer.signalCode === null) writer.kill('SIGKILL')
    for (const m of mounted.splice(0).reverse()) tryRun('umount', [m])
    if (loop) tryRun('losetup', ['-d', loop])
    loop = null
    if (disk && disk.exitCode === null && disk.signalCode === null) disk.kill('SIGKILL')
  }
  const dispose = () => {
    cleanup()
    fs.rmSync(dir, { recursive: true, force: true })
  }
  t.after(dispose)

  disk = spawn(process.execPath, [DISK, fuse, image], { stdio: ['pipe', 'pipe', 'inherit'] })
  const diskOut = lines(disk)
  const diskExit = once(disk, 'exit')
  await diskOut.next('ready', 20000, 'the FUSE disk')
  mounted.push(fuse)
  await waitFor(() => fs.existsSync(path.join(fuse, 'disk')), 20000, 'the FUSE mount')
  loop = run('losetup', ['-f', '--show', path.join(fuse, 'disk')]).trim()
  run('mount', ['-t', 'ext4', loop, mnt])
  mounted.push(mnt)

  const store = path.join(mnt, 'store.db')
  writer = spawn(process.execPath, [WRITER, store, durability, String(seed), String(paceMs)], { stdio: ['ignore', 'pipe', 'pipe'] })
  let out = ''
  let err = ''
  writer.stdout.setEncoding('utf8')
  writer.stdout.on('data', (d) => { out += d })
  writer.stderr.setEncoding('utf8')
  writer.stderr.on('data', (d) => { err += d })
  const writerClosed = once(writer, 'close')
  await waitFor(() => out.includes('ready\n') || writer.exitCode !== null, 30000, 'the writer')
  assert.ok(out.includes('ready\n'), `the writer got ready:\n${err}`)
  const ready = Date.now()
  await sleep(delayMs)

  if (stopFirst) {
    writer.kill('SIGSTOP')
    await waitFor(() => stopped(writer.pid), 10000, 'the writer to stop')
  }
  disk.stdin.write(`cut ${afterWrites}\n`)
  const [, flushes, pendingWrites, pendingBytes] = (await diskOut.next('cut', 10000, 'the cut')).split(' ').map(Number)
  const cutAt = Date.now()
  const ranMs = cutAt - ready
  if (!stopFirst) {
    // Each append fsyncs, which fails from the cut on: the writer stops by itself.
    await waitFor(() => /^E /m.test(out), 10000, 'the writer to fail')
  }
  writer.kill('SIGKILL')
  const [, signal] = await writerClosed
  assert.equal(signal, 'SIGKILL', `the writer was killed, not dead on its own:\n${err}`)

  // Unmounting writes to the disk too, after the cut: none of it counts.
  await umount(mnt)
  mounted = [fuse]
  run('losetup', ['-d', loop])
  loop = null
  const flushedImage = path.join(dir, 'flushed.img')
  const someImage = path.join(dir, 'some-unflushed.img')
  disk.stdin.write(`save ${flushedImage}\n`)
  await diskOut.next('saved', 20000, 'the flushed image')
  disk.stdin.write(`save ${someImage} ${seed}\n`)
  const kept = (await diskOut.next('saved', 20000, 'the image with some unflushed writes')).split(' ')[2]
  await umount(fuse)
  mounted = []
  await diskExit

  return {
    acks: parseAcks(out),
    error: (out.match(/^E .*$/m) || [null])[0],
    cutAt,
    ranMs,
    flushes,
    pendingWrites,
    pendingBytes,
    keptPieces: kept,
    images: { flushed: flushedImage, 'some unflushed': someImage },
    dir,
    dispose,
  }
}

// What the writer acknowledged, per session, in order: [{ uuids, batch, time }] (a single record
// is a batch of one, batch null).
function parseAcks(out) {
  const acks = new Map()
  for (const line of out.split('\n').slice(0, -1)) {
    if (line === 'ready' || line.startsWith('E ')) continue
    const parts = line.split(' ')
    if (!acks.has(parts[1])) acks.set(parts[1], [])
    if (parts[0] === 'S') acks.get(parts[1]).push({ uuids: [parts[2]], batch: null, time: Number(parts[3]) })
    else if (parts[0] === 'B') acks.get(parts[1]).push({ uuids: parts[3].split(','), batch: parts[2], time: Number(parts[4]) })
    else assert.fail(`unexpected line from the writer: ${line}`)
  }
  return acks
}

// Mounts `image` (ext4 replays its journal), opens the store as a new writer would after a reboot,
// checks it, unmounts and checks the file system. Returns, per session, [acknowledged, kept].
function checkImage(image, dir, durability, acks, what) {
  const mnt = path.join(dir, 'check')
  fs.mkdirSync(mnt, { recursive: true })
  const loop = run('losetup', ['-f', '--show', image]).trim()
  const counts = {}
  try {
    run('mount', ['-t', 'ext4', loop, mnt])
    try {
      const file = path.join(mnt, 'store.db')
      const sessions = ['s0', 's1', 's2']
      if (!fs.existsSync(file)) {
        // Possible only for 'process', whose sessions were never flushed.
        assert.equal(durability, 'process', `${what}: the store file survived`)
        for (const id of sessions) counts[id] = [ackedRecords(acks, id).length, 0]
        return counts
      }
      const store = Store.open(file, { durability })
      try {
        const report = store.verify()
        assert.equal(report.ok, true, `${what}: verify() is ok: ${JSON.stringify(report.damaged)}`)
        const listed = new Set(store.listSessions().map((s) => s.id))
        if (durability === 'power') assert.deepStrictEqual([...listed].sort(), sessions, `${what}: the sessions created survived`)
        const extras = []
        for (const id of sessions) {
          const acked = ackedRecords(acks, id)
          if (!listed.has(id)) {
            counts[id] = [acked.length, 0]
            continue
          }
          const s = store.openSession(id)
          const envs = s.envelopes()
          envs.forEach((e, i) => {
            assert.equal(e.seq, i, `${what}: ${id} seq contiguous at ${i}`)
            assert.equal(e.parentUuid, i === 0 ? null : envs[i - 1].uuid, `${what}: ${id} parent chain at ${i}`)
          })
          assert.equal(s.messages.length, envs.length, `${what}: ${id} messages`)
          assert.equal(s.info.messageCount, envs.length, `${what}: ${id} message count`)
          const uuids = envs.map((e) => e.uuid)
          const known = uuids.slice(0, acked.length)
          assert.deepStrictEqual(known, acked.slice(0, known.length), `${what}: ${id} holds a prefix of what was acknowledged, in order`)
          if (durability === 'power') assert.equal(known.length, acked.length, `${what}: ${id} holds every acknowledged append (${known.length} of ${acked.length})`)
          // Past what was acknowledged: only the append in flight at the cut, whole.
          const rest = envs.slice(known.length)
          if (rest.length) {
            assert.equal(known.length, acked.length, `${what}: ${id} has records past a gap in what was acknowledged`)
            extras.push(...rest)
          }
          counts[id] = [acked.length, known.length]
          // batches: all or nothing, in order
          const groups = new Map()
          envs.forEach((e, i) => {
            const b = e.metadata && e.metadata.batch
            if (b) groups.set(b, [...(groups.get(b) || []), i])
          })
          for (const [b, idx] of groups) {
            assert.equal(idx.length, envs[idx[0]].metadata.size, `${what}: ${id} batch ${b} whole`)
            idx.forEach((seq, j) => assert.equal(envs[seq].metadata.i, j, `${what}: ${id} batch ${b} in order`))
          }
        }
        assert.ok(new Set(extras.map((e) => e.metadata.n)).size <= 1, `${what}: at most the one append in flight past what was acknowledged`)
      } finally {
        store.close()
      }
    } finally {
      run('umount', [mnt])
    }
  } finally {
    run('losetup', ['-d', loop])
  }
  // The file system came back whole: the disk model keeps what ext4 relies on.
  run('e2fsck', ['-fn', image])
  return counts
}

function ackedRecords(acks, id) {
  return (acks.get(id) || []).flatMap((a) => a.uuids)
}

function total(counts) {
  let acked = 0
  let kept = 0
  for (const [a, k] of Object.values(counts)) {
    acked += a
    kept += k
  }
  return { acked, kept, lost: acked - kept }
}

// How long before the cut the first append that was lost had been acknowledged (null: none lost).
function lostWindowMs(cut, counts) {
  let first = Infinity
  for (const [id, [, kept]] of Object.entries(counts)) {
    let records = 0
    for (const a of cut.acks.get(id) || []) {
      if (records >= kept) {
        first = Math.min(first, a.time)
        break
      }
      records += a.uuids.length
    }
  }
  return first === Infinity ? null : cut.cutAt - first
}

function seeds(base, n) {
  if (process.env.THREADLINE_POWERCUT_SEED) return [Number(process.env.THREADLINE_POWERCUT_SEED)]
  return Array.from({ length: n }, (_, i) => base + i)
}

const BASE = Number(process.env.THREADLINE_POWERCUT_SEED) || (Date.now() % 1e6) * 10

test("durability 'power': a power cut at a random moment loses no acknowledged append", { timeout: 300000 }, async (t) => {
  let acked = 0
  for (const seed of seeds(BASE, 6)) {
    const random = mulberry32(seed)
    const delayMs = 100 + Math.floor(random() * 1400)
    // right after one of the next 40 block writes: between a write and the flush that follows it
    const afterWrites = 1 + Math.floor(random() * 40)
    const cut = await powerCut(t, { durability: 'power', seed, delayMs, stopFirst: false, afterWrites })
    for (const [kind, image] of Object.entries(cut.images)) {
      const what = `seed ${seed}, ${kind}`
      const counts = checkImage(image, cut.dir, 'power', cut.acks, what)
      const sum = total(counts)
      assert.equal(sum.lost, 0, `${what}: nothing acknowledged lost`)
      assert.match(String(cut.error), /^E STORE_IO /, `${what}: the writer's first failed append came after the cut, from the disk`)
      if (kind === 'flushed') acked += sum.acked
      t.diagnostic(`${what}: cut after ${cut.ranMs} ms, ${cut.flushes} flushes, ${cut.pendingWrites} writes (${cut.pendingBytes} bytes) unflushed${kind === 'flushed' ? '' : ` (${cut.keptPieces} pieces kept)`}; ${sum.acked} records acknowledged, ${sum.kept} kept; then: ${cut.error}`)
    }
    cut.dispose()
  }
  assert.ok(acked > 0, 'the writer got to append something')
})

test("durability 'process': a power cut loses at most a suffix of each session, and the store opens", { timeout: 3600000 }, async (t) => {
  for (const seed of seeds(BASE + 100, 3)) {
    const random = mulberry32(seed)
    const delayMs = Number(process.env.THREADLINE_POWERCUT_RUN_MS) || 100 + Math.floor(random() * 2900)
    const paceMs = Number(process.env.THREADLINE_POWERCUT_PACE_MS) || 0
    const cut = await powerCut(t, { durability: 'process', seed, delayMs, stopFirst: true, paceMs })
    for (const [kind, image] of Object.entries(cut.images)) {
      const what = `seed ${seed}, ${kind}`
      const counts = checkImage(image, cut.dir, 'process', cut.acks, what)
      const sum = total(counts)
      t.diagnostic(`${what}: cut after ${cut.ranMs} ms, ${cut.flushes} flushes, ${cut.pendingWrites} writes (${cut.pendingBytes} bytes) unflushed${kind === 'flushed' ? '' : ` (${cut.keptPieces} pieces kept)`}; ${sum.acked} records acknowledged, ${sum.kept} kept, ${sum.lost} lost${sum.lost ? `: those acknowledged in the last ${lostWindowMs(cut, counts)} ms` : ''}`)
    }
    cut.dispose()
  }
})
