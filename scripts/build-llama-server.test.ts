import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises'
import { hostname } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { afterEach, describe, expect } from 'vitest'
import { test } from '../fixtures/test-context.ts'
import { bundleCommit, LLAMA_BUNDLE, llamaServerBinary, llamaServerPath, removeStaleBuilds } from './build-llama-server.ts'

const SCRIPT = fileURLToPath(new URL('./build-llama-server.ts', import.meta.url))

describe('build-llama-server', () => {
  let cache: string
  const saved = process.env.SERVEGATE_CACHE

  // Each test's cache is a directory of its own.
  test.beforeEach(({ testDir }) => {
    cache = testDir
    process.env.SERVEGATE_CACHE = cache
  })

  afterEach(() => {
    if (saved === undefined) delete process.env.SERVEGATE_CACHE
    else process.env.SERVEGATE_CACHE = saved
  })

  test('reads the commit from the bundle head', async () => {
    const commit = await bundleCommit()
    expect(commit).toMatch(/^[0-9a-f]{40}$/)
    const { stdout } = await execa('git', ['bundle', 'list-heads', LLAMA_BUNDLE])
    expect(stdout).toContain(commit)
  })

  test('keys the cached binary by commit under $SERVEGATE_CACHE', async () => {
    const commit = await bundleCommit()
    expect(llamaServerBinary(commit)).toBe(join(cache, 'llama-server', commit, 'bin', 'llama-server'))
  })

  test('llamaServerPath is null until an executable sits at the cached path', async () => {
    expect(await llamaServerPath()).toBeNull()
    const binary = llamaServerBinary(await bundleCommit())
    await mkdir(dirname(binary), { recursive: true })
    await writeFile(binary, '#!/bin/sh\n')
    expect(await llamaServerPath()).toBeNull()
    await chmod(binary, 0o755)
    expect(await llamaServerPath()).toBe(binary)
  })

  test('--print-path prints the cached path, or exits 1 when it is missing', async () => {
    const missing = await execa(process.execPath, [SCRIPT, '--print-path'], { reject: false, env: { SERVEGATE_CACHE: cache } })
    expect(missing.exitCode).toBe(1)
    expect(missing.stdout).toBe('')
    expect(missing.stderr).toContain('npm run build:llama-server')

    const binary = llamaServerBinary(await bundleCommit())
    await mkdir(dirname(binary), { recursive: true })
    await writeFile(binary, '#!/bin/sh\n', { mode: 0o755 })
    const found = await execa(process.execPath, [SCRIPT, '--print-path'], { env: { SERVEGATE_CACHE: cache } })
    expect(found.stdout).toBe(binary)
  })

  test('removes the temp dirs of interrupted builds on this host, not those of running ones', async () => {
    const exited = execa(process.execPath, ['-e', ''])
    const deadPid = exited.pid
    await exited
    const dead = `.build-${hostname()}-${deadPid}-0000`
    const running = `.build-${hostname()}-${process.pid}-0000`
    const otherHost = `.build-elsewhere-${deadPid}-0000`
    for (const name of [dead, running, otherHost]) await mkdir(join(cache, name, 'src'), { recursive: true })
    await removeStaleBuilds(cache)
    expect((await readdir(cache)).sort()).toEqual([otherHost, running].sort())
  })
})
