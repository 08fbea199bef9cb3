/**
 * Builds the real `llama-server` from the llama.cpp source that node-llama-cpp ships (a git
 * bundle) and caches it outside the repo, keyed by the bundle's commit. Builds only when the
 * cached binary is missing: a build takes minutes (docs/engines.md).
 *
 *     node scripts/build-llama-server.ts               # build if missing, print the path
 *     node scripts/build-llama-server.ts --print-path  # print the cached path, exit 1 if missing
 */
import { randomBytes } from 'node:crypto'
import { rmSync } from 'node:fs'
import { access, constants, mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises'
import { homedir, hostname } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa, type Options } from 'execa'

/** The llama.cpp source node-llama-cpp ships: a git bundle with one head. */
export const LLAMA_BUNDLE = fileURLToPath(new URL('../node_modules/node-llama-cpp/llama/gitRelease.bundle', import.meta.url))

/**
 * CMake cache entries of the build, recorded beside the binary in `build-info.json`.
 * - Static libraries and a static libstdc++/libgcc, OpenMP off (ggml's own thread pool) and no
 *   OpenSSL, so the binary needs only glibc at run time and the cache can move between machines.
 * - `GGML_NATIVE=OFF` for the same reason; with it off ggml still enables the x86-64-v3 level
 *   (SSE4.2, AVX, AVX2, BMI2, FMA, F16C), which every current x86 CI machine has.
 * - No web UI: `LLAMA_USE_PREBUILT_UI` would download it from Hugging Face at build time.
 * - `LLAMA_CURL` is deprecated and ignored at this commit (model downloads are not needed).
 */
export const CMAKE_DEFINES: Readonly<Record<string, string>> = {
  CMAKE_BUILD_TYPE: 'Release',
  BUILD_SHARED_LIBS: 'OFF',
  CMAKE_EXE_LINKER_FLAGS: '-static-libgcc -static-libstdc++',
  GGML_NATIVE: 'OFF',
  GGML_OPENMP: 'OFF',
  LLAMA_OPENSSL: 'OFF',
  LLAMA_BUILD_TESTS: 'OFF',
  LLAMA_BUILD_EXAMPLES: 'OFF',
  LLAMA_BUILD_TOOLS: 'ON',
  LLAMA_BUILD_SERVER: 'ON',
  LLAMA_BUILD_APP: 'OFF',
  LLAMA_BUILD_UI: 'OFF',
  LLAMA_USE_PREBUILT_UI: 'OFF',
}

/** Parallel compile jobs; 2 matches the CI machine. */
const BUILD_JOBS = 2

/** `$SERVEGATE_CACHE`, else `~/.cache/servegate`. */
export function cacheRoot(): string {
  return process.env.SERVEGATE_CACHE || join(homedir(), '.cache', 'servegate')
}

/** The commit the bundle's single head points at, read with `git bundle list-heads`. */
export async function bundleCommit(bundle = LLAMA_BUNDLE): Promise<string> {
  const { stdout } = await execa('git', ['bundle', 'list-heads', bundle])
  const commits = new Set(
    stdout
      .split('\n')
      .map((line) => line.trim().split(/\s+/)[0] ?? '')
      .filter((sha) => /^[0-9a-f]{40}$/.test(sha)),
  )
  const [commit] = commits
  if (commits.size !== 1 || commit === undefined) {
    throw new Error(`llama.cpp bundle ${bundle} has ${commits.size} distinct heads, expected 1:\n${stdout}`)
  }
  return commit
}

/** Where the binary for `commit` lives in the cache (it may not exist yet). */
export function llamaServerBinary(commit: string, root = cacheRoot()): string {
  return join(root, 'llama-server', commit, 'bin', 'llama-server')
}

async function isExecutable(path: string): Promise<boolean> {
  try {
    await access(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}

/**
 * The cached `llama-server` built from the bundle's commit, or `null` when it has not been built
 * (run `npm run build:llama-server`).
 */
export async function llamaServerPath(): Promise<string | null> {
  const binary = llamaServerBinary(await bundleCommit())
  return (await isExecutable(binary)) ? binary : null
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** Removes temp dirs of earlier builds on this host whose process is gone (interrupted builds). */
export async function removeStaleBuilds(dir: string): Promise<void> {
  const prefix = `.build-${hostname()}-`
  for (const name of await readdir(dir)) {
    if (!name.startsWith(prefix)) continue
    const pid = Number(name.slice(prefix.length).split('-')[0])
    if (Number.isInteger(pid) && !pidAlive(pid)) {
      console.log(`[llama-server] removing interrupted build ${name}`)
      await rm(join(dir, name), { recursive: true, force: true })
    }
  }
}

/**
 * Builds `llama-server` for the bundle's commit unless it is cached; returns the binary path.
 * The build runs in a temp dir under the cache and the finished `<commit>/` dir is renamed into
 * place, so an interrupted build never leaves a binary that looks cached.
 */
export async function buildLlamaServer(): Promise<string> {
  const commit = await bundleCommit()
  const binary = llamaServerBinary(commit)
  if (await isExecutable(binary)) {
    console.log(`[llama-server] cached: ${binary}`)
    return binary
  }
  const dir = join(cacheRoot(), 'llama-server')
  await mkdir(dir, { recursive: true })
  await removeStaleBuilds(dir)
  const work = join(dir, `.build-${hostname()}-${process.pid}-${randomBytes(4).toString('hex')}`)
  const src = join(work, 'src')
  const build = join(work, 'build')
  const out = join(work, 'out')
  const started = performance.now()
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(0)} s`
  // Each step runs in its own process group; on SIGINT/SIGTERM the whole group (make and the
  // compilers under it) is killed and the temp dir removed, so nothing keeps building.
  let step: { pid?: number } | undefined
  const onSignal = (signal: NodeJS.Signals) => {
    if (step?.pid !== undefined) {
      try {
        process.kill(-step.pid, 'SIGKILL')
      } catch {
        // The group is already gone.
      }
    }
    // A compiler killed a moment ago may still be writing; an interrupted dir left behind is
    // removed by the next build (removeStaleBuilds).
    try {
      rmSync(work, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 })
    } catch {
      console.error(`[llama-server] could not remove ${work}; the next build removes it`)
    }
    console.error(`[llama-server] ${signal}: build stopped after ${elapsed()}`)
    process.exit(signal === 'SIGINT' ? 130 : 143)
  }
  const run = async (file: string, args: readonly string[], options: Options = {}) => {
    const subprocess = execa(file, args, { ...options, detached: true })
    step = subprocess
    try {
      return await subprocess
    } finally {
      step = undefined
    }
  }
  process.once('SIGINT', onSignal)
  process.once('SIGTERM', onSignal)
  try {
    console.log(`[llama-server] building llama.cpp ${commit} in ${work}`)
    await run('git', ['clone', '--quiet', '--no-checkout', LLAMA_BUNDLE, src])
    await run('git', ['-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', commit], { cwd: src })
    const defines = Object.entries(CMAKE_DEFINES).map(([key, value]) => `-D${key}=${value}`)
    console.log(`[llama-server] configuring: cmake ${defines.join(' ')}`)
    await run('cmake', ['-S', src, '-B', build, ...defines], { stdout: 'inherit', stderr: 'inherit' })
    console.log(`[llama-server] compiling with ${BUILD_JOBS} jobs (about 5 to 14 minutes on 2 cores)`)
    await run('cmake', ['--build', build, '--config', 'Release', '--target', 'llama-server', '-j', String(BUILD_JOBS)], {
      stdout: 'inherit',
      stderr: 'inherit',
    })
    await mkdir(join(out, 'bin'), { recursive: true })
    await rename(join(build, 'bin', 'llama-server'), join(out, 'bin', 'llama-server'))
    const { stdout: gcc } = await execa('gcc', ['--version'])
    const info = { commit, cmake: CMAKE_DEFINES, compiler: gcc.split('\n')[0], builtAt: new Date().toISOString() }
    await writeFile(join(out, 'build-info.json'), `${JSON.stringify(info, null, 2)}\n`)
    try {
      await rename(out, join(dir, commit))
    } catch (error) {
      // Another build of the same commit finished first; its binary is as good as ours.
      if (!(await isExecutable(binary))) throw error
    }
    console.log(`[llama-server] built in ${elapsed()}`)
    return binary
  } finally {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
    await rm(work, { recursive: true, force: true })
  }
}

async function main(args: readonly string[]): Promise<number> {
  if (args.includes('--print-path')) {
    const path = await llamaServerPath()
    if (path === null) {
      console.error('llama-server is not built; run `npm run build:llama-server`')
      return 1
    }
    console.log(path)
    return 0
  }
  console.log(await buildLlamaServer())
  return 0
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2))
}
