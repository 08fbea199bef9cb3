/**
 * Runs `servegate run`, the real CLI (`bin/servegate.js`), as a user would: a fresh process,
 * pinned from its first instruction to one CPU (`taskset -c`, so the CLI sizes itself for the
 * one core it gets), a closed loop against a bench server, the run record written with `--out`.
 */
import { copyFile, mkdir, readFile, stat, symlink } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { readRunRecord } from '../src/record/record-io.ts'
import type { RunRecord } from '../src/schema/run.ts'
import { MODEL } from './chunks.ts'

export const SERVEGATE_BIN = fileURLToPath(new URL('../bin/servegate.js', import.meta.url))
const ROOT = fileURLToPath(new URL('..', import.meta.url))

/**
 * `servegate run` as a user installs it: this checkout built (`scripts/build.ts`, compiled
 * JavaScript in `dist/`) and laid out in `dir` as the package is (`bin/`, `dist/`,
 * `package.json`, its dependencies), with no `src/` beside `bin/`, so `bin/servegate.js` loads
 * the compiled CLI, not the TypeScript sources (whose type stripping costs a process some 17 MB).
 * @returns the staged `bin/servegate.js`
 * @throws when the build fails
 */
export async function stageBuiltCli(dir: string): Promise<string> {
  const built = await execa(process.execPath, [join(ROOT, 'scripts/build.ts')], { cwd: ROOT, reject: false, stdin: 'ignore' })
  if (built.exitCode !== 0) throw new Error(`scripts/build.ts exited ${built.exitCode}\n${String(built.stderr).slice(-2000)}`)
  await mkdir(join(dir, 'bin'), { recursive: true })
  await copyFile(join(ROOT, 'bin/servegate.js'), join(dir, 'bin/servegate.js'))
  await copyFile(join(ROOT, 'package.json'), join(dir, 'package.json'))
  await symlink(join(ROOT, 'dist'), join(dir, 'dist'))
  await symlink(join(ROOT, 'node_modules'), join(dir, 'node_modules'))
  return join(dir, 'bin/servegate.js')
}

export interface CliRunOptions {
  /** The bench server's origin, e.g. `http://127.0.0.1:41234`. */
  origin: string
  concurrency: number
  /** Measured requests (`--requests`). */
  requests: number
  /** `--warmup`: unrecorded requests first, as many as the concurrency opens every connection. */
  warmup: number
  /** `--max-tokens`: token chunks per stream from the bench servers. */
  maxTokens: number
  /** `--out`: the run record's path. */
  out: string
  /** Pin the CLI to this CPU from its start; null: unpinned. */
  cpu: number | null
  /** Sample the working process's VmHWM while it runs (see `CliRunResult.peakRssMB`). */
  sampleRss?: boolean
  /** The CLI to run: a `bin/servegate.js`. @default SERVEGATE_BIN, this checkout's (its TypeScript sources) */
  bin?: string
  /** `--request-timeout-ms`. @default 60000 */
  requestTimeoutMs?: number
  signal?: AbortSignal
}

export interface CliRunResult {
  exitCode: number
  /** The process's wall time, start-up and record writing included, s. */
  wallS: number
  /**
   * Peak RSS of the process that ran the cell, MB: the last VmHWM read from `/proc/PID/status`
   * (every 5 ms) of the image the CLI re-executed itself into under the bench workers' V8 flags
   * (`src/cli/start.ts`; the same pid, a new image, a new high-water mark). Null unless sampled
   * or where there is no procfs. It misses growth in the last 5 ms before the process exits.
   */
  peakRssMB: number | null
  /** The record as servegate reads it back (`readRunRecord`: packed gaps decoded). */
  record: RunRecord
  /** The record file's size on disk, bytes. */
  recordBytes: number
  stderrTail: string
}

const SAMPLE_EVERY_MS = 5

/**
 * Samples a process's VmHWM until it exits, keeping the last figure read: VmHWM starts anew at
 * each exec and only grows within an image, so the last read is the peak of the last image.
 */
function sampleHighWater(pid: number): { stop: () => Promise<number | null> } {
  let hwmKb: number | null = null
  let running = true
  const loop = (async () => {
    while (running) {
      try {
        const kb = /^VmHWM:\s*(\d+) kB$/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1]
        if (kb !== undefined) hwmKb = Number(kb)
      } catch {
        // Gone, or no procfs.
      }
      await new Promise((resolve) => setTimeout(resolve, SAMPLE_EVERY_MS))
    }
  })()
  return {
    stop: async () => {
      running = false
      await loop
      return hwmKb === null ? null : hwmKb / 1024
    },
  }
}

/**
 * One `servegate run --concurrency C` against a bench server, the CLI's flags for a server that
 * has no tokenizer (`--no-calibrate --no-retokenize`).
 * @throws when the process fails to start or writes no record
 */
export async function runServegateCli(o: CliRunOptions): Promise<CliRunResult> {
  const args = [
    o.bin ?? SERVEGATE_BIN,
    'run',
    ...['--base-url', o.origin, '--model', MODEL, '--concurrency', String(o.concurrency)],
    ...['--requests', String(o.requests), '--warmup', String(o.warmup), '--max-tokens', String(o.maxTokens)],
    ...['--request-timeout-ms', String(o.requestTimeoutMs ?? 60_000), '--no-calibrate', '--no-retokenize'],
    ...['--out', o.out, '--json'],
  ]
  const [file, argv] = o.cpu === null ? [process.execPath, args] : ['taskset', ['-c', String(o.cpu), process.execPath, ...args]]
  const t0 = performance.now()
  const child = execa(file, argv, {
    reject: false,
    stdin: 'ignore',
    cleanup: true,
    forceKillAfterDelay: 2000,
    timeout: 10 * 60_000,
    ...(o.signal === undefined ? {} : { cancelSignal: o.signal }),
  })
  const sampler = o.sampleRss === true && child.pid !== undefined ? sampleHighWater(child.pid) : null
  const result = await child
  const wallS = (performance.now() - t0) / 1000
  const peakRssMB = sampler === null ? null : await sampler.stop()
  const stderrTail = String(result.stderr).slice(-2000)
  let record: RunRecord
  try {
    record = await readRunRecord(o.out)
  } catch (error) {
    throw new Error(
      `servegate run (C=${o.concurrency}) wrote no readable record (exit ${result.exitCode}): ${String(error)}\n${stderrTail}`,
      {
        cause: error,
      },
    )
  }
  return { exitCode: result.exitCode ?? -1, wallS, peakRssMB, record, recordBytes: (await stat(o.out)).size, stderrTail }
}
