import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { afterEach, describe, expect, test } from 'vitest'
import { alive } from '../../fixtures/processes.ts'
import { cgroupDirOf, EngineCgroup } from './engine-cgroup.ts'
import { signalPid } from './process-tree.ts'

const line = (mountId: number, root: string, mountPoint: string, fsType: string): string =>
  `${mountId} 22 0:${mountId} ${root} ${mountPoint} rw,nosuid,nodev,noexec,relatime shared:9 - ${fsType} ${fsType} rw`

describe('cgroupDirOf', () => {
  test('a pure cgroup v2 host: the 0:: path under /sys/fs/cgroup', () => {
    const mounts = line(30, '/', '/sys/fs/cgroup', 'cgroup2')
    expect(cgroupDirOf('0::/user.slice/user-1000.slice/session-2.scope\n', mounts)).toBe(
      '/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope',
    )
  })

  test('a hybrid host: v1 controllers at /sys/fs/cgroup, the v2 hierarchy at /sys/fs/cgroup/unified', () => {
    const mounts = [
      line(30, '/', '/sys/fs/cgroup', 'tmpfs'),
      line(31, '/', '/sys/fs/cgroup/memory', 'cgroup'),
      line(40, '/', '/sys/fs/cgroup/unified', 'cgroup2'),
    ]
    expect(cgroupDirOf('4:memory:/docker/abc\n0::/docker/abc\n', mounts.join('\n'))).toBe('/sys/fs/cgroup/unified/docker/abc')
  })

  test('a mount of a sub-hierarchy (a container without a cgroup namespace) shows the path below its root', () => {
    const mounts = line(30, '/docker/abc', '/sys/fs/cgroup', 'cgroup2')
    expect(cgroupDirOf('0::/docker/abc/init\n', mounts)).toBe('/sys/fs/cgroup/init')
    expect(cgroupDirOf('0::/docker/other\n', mounts)).toBeNull()
  })

  test('no v2 hierarchy, or one that is gone: null', () => {
    expect(cgroupDirOf('4:memory:/x\n', line(31, '/', '/sys/fs/cgroup/memory', 'cgroup'))).toBeNull()
    expect(cgroupDirOf('0::/x\n', line(31, '/', '/sys/fs/cgroup/memory', 'cgroup'))).toBeNull()
    expect(cgroupDirOf('0::/gone (deleted)\n', line(30, '/', '/sys/fs/cgroup', 'cgroup2'))).toBeNull()
  })
})

describe('EngineCgroup', () => {
  const pids: number[] = []
  const cgroups: EngineCgroup[] = []
  afterEach(() => {
    for (const pid of pids.splice(0)) signalPid(pid, 'SIGKILL')
    for (const c of cgroups.splice(0)) c.killNowAndRemove(1000)
  })

  test('where cgroup v2 cannot be had, there is none', () => {
    expect(EngineCgroup.create('x', null)).toBeNull()
    expect(EngineCgroup.create('x', '/nonexistent/cgroup')).toBeNull()
  })

  test('holds what its members fork, kills them all, and is removed', async (ctx) => {
    const cgroup = EngineCgroup.create(`test-${process.pid}-${Date.now()}`)
    if (cgroup === null) return ctx.skip('cgroup v2 is not writable here (not root, no delegated cgroup, or cgroup v1 only)')
    cgroups.push(cgroup)
    // Two members: one kill reaches both.
    const child = spawn('sleep', ['60'], { stdio: 'ignore', detached: true })
    pids.push(child.pid as number)
    expect(cgroup.adopt(child.pid as number)).toBe(true)
    const late = spawn('sleep', ['60'], { stdio: 'ignore', detached: true })
    pids.push(late.pid as number)
    expect(cgroup.adopt(late.pid as number)).toBe(true)
    expect(cgroup.members().sort()).toEqual([child.pid, late.pid].sort())
    expect(cgroup.remove()).toBe(false)

    expect(await cgroup.kill(2000)).toBe(true)
    expect(cgroup.members()).toEqual([])
    await expect.poll(() => [child.pid, late.pid].filter((p) => alive(p as number))).toEqual([])
    expect(await cgroup.removeWithin(2000)).toBe(true)
    expect(existsSync(cgroup.dir)).toBe(false)
  })

  test('a process that is gone cannot be adopted', (ctx) => {
    const cgroup = EngineCgroup.create(`test-${process.pid}-${Date.now()}-gone`)
    if (cgroup === null) return ctx.skip('cgroup v2 is not writable here')
    cgroups.push(cgroup)
    expect(cgroup.adopt(2 ** 22 + 1)).toBe(false)
    expect(cgroup.members()).toEqual([])
  })
})
