import { mkdir, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect } from 'vitest'
import { test } from '../../fixtures/test-context.ts'
import { findMemoryCgroup, parseMountinfo, parseProcCgroup, startHostMemorySampler } from './cgroup.ts'

/** A hybrid host as this project's machines are: v1 controllers, cgroup2 mounted without memory. */
const HYBRID_PROC_CGROUP = '9:name=systemd:/\n4:memory:/process_api/a0566e7e\n1:cpu:/\n0::/\n'
const HYBRID_MOUNTINFO = [
  '31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755',
  '35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory',
  '32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu',
  '41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw',
  '22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/root rw',
].join('\n')

describe('parsing /proc/self/cgroup and mountinfo', () => {
  test('controllers and paths per hierarchy', () => {
    expect(parseProcCgroup(HYBRID_PROC_CGROUP)).toEqual([
      { hierarchy: '9', controllers: ['name=systemd'], path: '/' },
      { hierarchy: '4', controllers: ['memory'], path: '/process_api/a0566e7e' },
      { hierarchy: '1', controllers: ['cpu'], path: '/' },
      { hierarchy: '0', controllers: [], path: '/' },
    ])
  })

  test('only cgroup mounts, with optional fields and escaped spaces', () => {
    const text = `${HYBRID_MOUNTINFO}\n50 31 0:40 /docker/abc /mnt/my\\040cgroup rw shared:5 master:2 - cgroup2 cgroup2 rw,nsdelegate`
    expect(parseMountinfo(text)).toEqual([
      { root: '/', mountPoint: '/sys/fs/cgroup/memory', fsType: 'cgroup', superOptions: ['rw', 'memory'] },
      { root: '/', mountPoint: '/sys/fs/cgroup/cpu', fsType: 'cgroup', superOptions: ['rw', 'cpu'] },
      { root: '/', mountPoint: '/sys/fs/cgroup/unified', fsType: 'cgroup2', superOptions: ['rw'] },
      { root: '/docker/abc', mountPoint: '/mnt/my cgroup', fsType: 'cgroup2', superOptions: ['rw', 'nsdelegate'] },
    ])
  })
})

interface FakeHost {
  root: string
  procCgroupPath: string
  mountinfoPath: string
}

/** Writes a fake /proc/self/cgroup and mountinfo into `root`, with the mount points under it. */
async function fakeHost(
  root: string,
  procCgroup: string,
  mounts: Array<{ root?: string; at: string; fsType: 'cgroup' | 'cgroup2'; options: string }>,
): Promise<FakeHost> {
  const lines = mounts.map(
    (m, i) => `${40 + i} 31 0:${40 + i} ${m.root ?? '/'} ${join(root, m.at)} rw,relatime - ${m.fsType} ${m.fsType} ${m.options}`,
  )
  await writeFile(join(root, 'cgroup'), procCgroup)
  await writeFile(join(root, 'mountinfo'), `${lines.join('\n')}\n`)
  return { root, procCgroupPath: join(root, 'cgroup'), mountinfoPath: join(root, 'mountinfo') }
}

/** Replaces a file in one step, as the kernel's files change: a sampler never reads it half-written. */
async function replace(path: string, content: string): Promise<void> {
  await writeFile(`${path}.tmp`, content)
  await rename(`${path}.tmp`, path)
}

async function files(dir: string, entries: Record<string, string>): Promise<void> {
  await mkdir(dir, { recursive: true })
  for (const [name, content] of Object.entries(entries)) await writeFile(join(dir, name), content)
}

describe('findMemoryCgroup', () => {
  test('cgroup v2: the 0:: path under the cgroup2 mount', async ({ testDir }) => {
    const host = await fakeHost(testDir, '0::/user.slice/servegate.scope\n', [
      { at: 'sys/fs/cgroup', fsType: 'cgroup2', options: 'rw,nsdelegate' },
    ])
    const dir = join(host.root, 'sys/fs/cgroup/user.slice/servegate.scope')
    await files(dir, { 'memory.current': '1000\n' })
    expect(await findMemoryCgroup(host)).toEqual({ status: 'ok', version: 'v2', dir })
  })

  test('a mount of a sub-hierarchy (container namespace) shows the path relative to its root', async ({ testDir }) => {
    const host = await fakeHost(testDir, '0::/docker/abc/inner\n', [{ root: '/docker/abc', at: 'cg', fsType: 'cgroup2', options: 'rw' }])
    const dir = join(host.root, 'cg/inner')
    await files(dir, { 'memory.current': '1\n' })
    expect(await findMemoryCgroup(host)).toEqual({ status: 'ok', version: 'v2', dir })
  })

  test('hybrid: cgroup2 without the memory controller falls through to v1', async ({ testDir }) => {
    const host = await fakeHost(testDir, HYBRID_PROC_CGROUP, [
      { at: 'unified', fsType: 'cgroup2', options: 'rw' },
      { at: 'memory', fsType: 'cgroup', options: 'rw,memory' },
    ])
    await mkdir(join(host.root, 'unified'), { recursive: true })
    const dir = join(host.root, 'memory/process_api/a0566e7e')
    await files(dir, { 'memory.usage_in_bytes': '7749632\n' })
    expect(await findMemoryCgroup(host)).toEqual({ status: 'ok', version: 'v1', dir })
  })

  test('no memory cgroup files: absent, naming what was tried', async ({ testDir }) => {
    const host = await fakeHost(testDir, '0::/x\n', [{ at: 'cg', fsType: 'cgroup2', options: 'rw' }])
    expect(await findMemoryCgroup(host)).toEqual({
      status: 'absent',
      reason: `no memory cgroup files (tried ${join(host.root, 'cg/x')}/memory.current)`,
    })
  })

  test('no cgroup hierarchy mounted, or no /proc: absent with the reason', async ({ testDir }) => {
    const host = await fakeHost(testDir, '0::/x\n', [])
    expect(await findMemoryCgroup(host)).toEqual({
      status: 'absent',
      reason: `no memory cgroup: ${host.procCgroupPath} names no cgroup2 or v1 memory hierarchy that is mounted`,
    })
    const missing = await findMemoryCgroup({ procCgroupPath: join(host.root, 'nope'), mountinfoPath: host.mountinfoPath })
    expect(missing).toEqual({ status: 'absent', reason: expect.stringContaining('(not Linux?)') })
  })
})

describe('startHostMemorySampler', () => {
  test('cgroup v2: sampled peak of memory.current, lifetime memory.peak, no limit', async ({ testDir: dir }) => {
    await files(dir, { 'memory.current': '1000000\n', 'memory.peak': '9000000\n', 'memory.max': 'max\n' })
    const sampler = startHostMemorySampler({ cgroup: { status: 'ok', version: 'v2', dir }, intervalMs: 5 })
    // Generous holds: a loaded CI machine may delay a 5 ms read by tens of ms.
    await sleep(100)
    await replace(join(dir, 'memory.current'), '5000000\n')
    await sleep(150)
    await replace(join(dir, 'memory.current'), '2000000\n')
    const memory = await sampler.stop()
    expect(memory).toMatchObject({
      status: 'ok',
      cgroupVersion: 'v2',
      cgroupDir: dir,
      lifetimePeakBytes: 9000000,
      lifetimePeakSource: 'memory.peak',
      sampledPeakBytes: 5000000,
      firstBytes: 1000000,
      lastBytes: 2000000,
      limitBytes: null,
      intervalMs: 5,
      readErrors: 0,
      reasons: { limitBytes: 'memory.max is "max" (no limit)' },
    })
    expect(memory.status === 'ok' && memory.samples).toBeGreaterThanOrEqual(3)
  })

  test('cgroup v2 on a kernel before 5.19: no memory.peak, lifetime peak null with the reason', async ({ testDir: dir }) => {
    await files(dir, { 'memory.current': '4096\n', 'memory.max': '8589934592\n' })
    const memory = await startHostMemorySampler({ cgroup: { status: 'ok', version: 'v2', dir }, intervalMs: 5 }).stop()
    expect(memory).toMatchObject({
      status: 'ok',
      lifetimePeakBytes: null,
      lifetimePeakSource: null,
      sampledPeakBytes: 4096,
      limitBytes: 8589934592,
      reasons: { lifetimePeakBytes: 'memory.peak does not exist: the kernel predates Linux 5.19' },
    })
  })

  test('cgroup v1: max_usage_in_bytes, and the page-counter maximum means no limit', async ({ testDir }) => {
    const host = await fakeHost(testDir, HYBRID_PROC_CGROUP, [{ at: 'memory', fsType: 'cgroup', options: 'rw,memory' }])
    const dir = join(host.root, 'memory/process_api/a0566e7e')
    await files(dir, {
      'memory.usage_in_bytes': '7749632\n',
      'memory.max_usage_in_bytes': '41390080\n',
      'memory.limit_in_bytes': '9223372036854771712\n',
    })
    const memory = await startHostMemorySampler({ ...host, intervalMs: 5 }).stop()
    expect(memory).toMatchObject({
      status: 'ok',
      cgroupVersion: 'v1',
      lifetimePeakBytes: 41390080,
      lifetimePeakSource: 'memory.max_usage_in_bytes',
      sampledPeakBytes: 7749632,
      limitBytes: null,
      reasons: { limitBytes: 'memory.limit_in_bytes is 9223372036854771712 (no limit)' },
    })
  })

  test('unreadable usage: counted, every usage figure null with the reason', async ({ testDir: dir }) => {
    await files(dir, { 'memory.current': 'garbage\n', 'memory.peak': '10\n', 'memory.max': 'max\n' })
    const memory = await startHostMemorySampler({ cgroup: { status: 'ok', version: 'v2', dir }, intervalMs: 5 }).stop()
    const why = expect.stringMatching(
      /^no read of memory\.current succeeded \(\d+ failed; last: memory\.current holds "garbage", not a byte count\)$/,
    )
    expect(memory).toMatchObject({
      status: 'ok',
      samples: 0,
      sampledPeakBytes: null,
      firstBytes: null,
      lastBytes: null,
      reasons: { sampledPeakBytes: why, firstBytes: why, lastBytes: why },
    })
  })

  test('no cgroup: absent', async () => {
    expect(await startHostMemorySampler({ cgroup: { status: 'absent', reason: 'not Linux' } }).stop()).toEqual({
      status: 'absent',
      reason: 'not Linux',
    })
  })

  test('this machine: its own cgroup is found and read, or absent with the reason', async () => {
    const memory = await startHostMemorySampler({ intervalMs: 10 }).stop()
    if (memory.status === 'absent') {
      expect(memory.reason).not.toBe('')
      return
    }
    expect(memory.sampledPeakBytes).toBeGreaterThan(0)
    expect(memory.samples).toBeGreaterThanOrEqual(1)
    if (memory.lifetimePeakBytes === null) expect(memory.reasons.lifetimePeakBytes).toBeDefined()
    else expect(memory.lifetimePeakBytes).toBeGreaterThan(0)
  })
})
