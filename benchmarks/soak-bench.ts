/**
 * `npm run bench:soak [-- --minutes 30] [-- --rate 100] [-- --json FILE] [-- --node-defaults]`:
 * does a long cell's memory stay flat in `servegate run` as users run it? The CLI runs in a
 * child process (`node bin/servegate.js run`, so under the Node flags it re-executes itself
 * with) for one open-loop cell at a constant rate against the simulated engine in another
 * process, its requests spilled to disk, for the given minutes. `--node-defaults` runs the CLI
 * under Node's defaults instead: how it ran before it took the client's flags.
 *
 * The CLI's RSS is read from /proc (Linux) every 10 s (every second under a minute) while the
 * requests run, its JS heap from inside it (`soak-probe.js`, loaded with `--import`), the
 * requests done from the spill it appends to. Prints the RSS after warm-up (the first fifth of
 * the run, at least one sample), at the end, and the growth between the medians of the first and
 * last three samples after warm-up (a busy machine is noisy), against the target: under 20 MB
 * growth over 30 minutes after warm-up. Then, apart, the cost of the end (the figures read back
 * from the spill and the record written from it: its time and the RSS peak it reaches) and the
 * CLI's peak RSS over the whole run. Nothing here fails the run.
 */
import { open, mkdtemp, readFile, rm, stat, writeFile, type FileHandle } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { execa } from 'execa'
import { NO_REEXEC_ENV } from '../src/cli/start.ts'
import { median } from './report.ts'

const TARGET_GROWTH_MB = 20

export interface SoakFigures {
  minutes: number
  ratePerS: number
  requests: number
  completed: number
  /** The Node flags the CLI's process ran under (its command line); the probe's `--import` left out. */
  nodeFlags: string[]
  samples: number
  rssAfterWarmupMB: number
  rssEndMB: number
  growthMB: number
  /** Growth per finished request after warm-up, bytes. */
  growthBytesPerRequest: number | null
  /** Of the growth, how much is the JS heap V8 reserved (heapTotal), MB. */
  heapGrowthMB: number
  /** The end of the cell: the figures from the spill, then the record written from it. */
  finish: { seconds: number; rssPeakMB: number; recordMB: number }
  /** The CLI process's peak RSS over the whole run (VmHWM), MB. */
  peakRssMB: number
}

export interface SoakOptions {
  /** Run the CLI under Node's defaults, not the client flags it re-executes itself with. @default false */
  nodeDefaults?: boolean
  log?: (line: string) => void
}

const BIN = fileURLToPath(new URL('../bin/servegate.js', import.meta.url))
const PROBE = fileURLToPath(new URL('./soak-probe.js', import.meta.url))

/** The simulated engine in a child process; resolves with its URL once it listens. */
async function startSimProcess(): Promise<{ url: string; close(): Promise<void> }> {
  const flags = ['--port', '0', '--model', 'm', '--prefill-tok-per-s', '1000000', '--decode-tok-per-s', '2000', '--batch-slowdown', '0']
  const child = execa(process.execPath, [BIN, 'sim', ...flags], { reject: false, buffer: false })
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      const found = /listening on (\S+)/.exec(chunk.toString())
      if (found !== null) resolve(found[1] as string)
    })
    void child.then(() => reject(new Error('servegate sim exited before it listened')))
  })
  return {
    url,
    async close() {
      child.kill('SIGTERM')
      await child
    },
  }
}

/** RSS now and its peak (VmHWM) of a running process, MB, from /proc; null once it is gone. */
async function rssOf(pid: number): Promise<{ rssMB: number; hwmMB: number } | null> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => null)
  const kB = (field: string): number | undefined => {
    const found = status === null ? null : new RegExp(`^${field}:\\s*(\\d+) kB$`, 'm').exec(status)
    return found === null ? undefined : Number(found[1])
  }
  const rss = kB('VmRSS')
  const hwm = kB('VmHWM')
  return rss === undefined || hwm === undefined ? null : { rssMB: rss / 1024, hwmMB: hwm / 1024 }
}

/** The Node flags of a running process (its command line up to the script), less the probe's. */
async function nodeFlagsOf(pid: number): Promise<string[]> {
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')
  return argv.slice(1, argv.indexOf(BIN)).filter((a) => a !== '--import' && a !== PROBE)
}

/**
 * The requests the CLI finished so far: the lines of its spill, read on from where the last
 * read stopped. The file stays open, so the last lines are read even after the CLI removes it.
 */
class SpillLines {
  count = 0
  private handle: FileHandle | null = null
  private offset = 0
  private readonly buffer = Buffer.alloc(1 << 20)
  private readonly path: string
  constructor(path: string) {
    this.path = path
  }

  async read(): Promise<number> {
    this.handle ??= await open(this.path).catch(() => null)
    if (this.handle === null) return this.count
    for (;;) {
      const { bytesRead } = await this.handle.read(this.buffer, 0, this.buffer.length, this.offset)
      if (bytesRead === 0) return this.count
      this.offset += bytesRead
      for (let i = 0; i < bytesRead; i++) if (this.buffer[i] === 0x0a) this.count++
    }
  }

  async close(): Promise<void> {
    await this.handle?.close()
  }
}

interface Sample {
  atS: number
  rssMB: number
  heapMB: number
  done: number
}

/** The CLI's JS heap as the probe last wrote it; zeros before its first write. */
async function probedHeap(path: string): Promise<{ heapTotal: number; heapUsed: number; external: number }> {
  const text = await readFile(path, 'utf8').catch(() => null)
  return text === null ? { heapTotal: 0, heapUsed: 0, external: 0 } : JSON.parse(text)
}

/** Runs the soak and returns its figures. */
export async function soak(minutes: number, ratePerS: number, options: SoakOptions = {}): Promise<SoakFigures> {
  const log = options.log ?? console.log
  if (process.platform !== 'linux') throw new Error('bench:soak reads the CLI process from /proc: Linux only')
  const sim = await startSimProcess()
  const dir = await mkdtemp(join(tmpdir(), 'servegate-soak-'))
  const out = join(dir, 'soak.json')
  const probe = join(dir, 'heap.json')
  const spill = new SpillLines(`${out}.requests.jsonl`)
  const requests = Math.round(minutes * 60 * ratePerS)
  const everyMs = minutes < 1 ? 1000 : 10_000
  const cell = ['--requests', `${requests}`, '--max-tokens', '16', '--prompt-tokens', '256', '--no-calibrate']
  const load = ['--rate', `${ratePerS}`, '--arrival', 'constant']
  const argv = ['run', '--base-url', sim.url, '--model', 'm', ...cell, ...load, '--out', out, '--json']
  const env = { SERVEGATE_SOAK_PROBE: probe, ...(options.nodeDefaults === true ? { [NO_REEXEC_ENV]: '1' } : {}) }
  try {
    const cli = execa(process.execPath, ['--import', PROBE, BIN, ...argv], { reject: false, env })
    const pid = cli.pid as number
    let exited = false
    void cli.finally(() => (exited = true))
    const samples: Sample[] = []
    let nodeFlags: string[] = []
    let started = 0
    let nextSampleAt = 0
    let finishStarted: number | null = null
    let finishPeakMB = 0
    let peakMB = 0
    while (!exited) {
      // Every 100 ms from the last second of requests on: the end of the cell is timed to that.
      await sleep(requests - spill.count > ratePerS ? 1000 : 100)
      const done = await spill.read()
      const rss = await rssOf(pid)
      if (rss === null) continue
      peakMB = Math.max(peakMB, rss.hwmMB)
      // Measuring starts with the first finished request (the re-execution is over by then).
      if (done === 0) continue
      if (started === 0) {
        started = performance.now()
        nodeFlags = await nodeFlagsOf(pid)
      }
      if (done === requests) {
        finishStarted ??= performance.now()
        finishPeakMB = Math.max(finishPeakMB, rss.rssMB)
        continue
      }
      if (performance.now() < nextSampleAt) continue
      nextSampleAt = performance.now() + everyMs
      const heap = await probedHeap(probe)
      const sample = { atS: (performance.now() - started) / 1000, rssMB: rss.rssMB, heapMB: heap.heapTotal / 2 ** 20, done }
      samples.push(sample)
      // The JS heap V8 holds (used or not) and what it holds live, apart from the rest of RSS.
      const live = `heap ${(heap.heapUsed / 2 ** 20).toFixed(1)} of ${sample.heapMB.toFixed(1)} MB, external ${(heap.external / 2 ** 20).toFixed(1)} MB`
      log(`${sample.atS.toFixed(0)} s: RSS ${sample.rssMB.toFixed(1)} MB (${live}), ${done} requests done`)
    }
    const result = await cli
    const finishSeconds = finishStarted === null ? 0 : (performance.now() - finishStarted) / 1000
    if (result.exitCode !== 0) throw new Error(`servegate run exited ${result.exitCode}: ${result.stderr.slice(-500)}`)
    const { completed } = JSON.parse(result.stdout) as { completed: number }
    const finish = { seconds: finishSeconds, rssPeakMB: finishPeakMB, recordMB: (await stat(out)).size / 2 ** 20 }
    return { minutes, ratePerS, requests, completed, nodeFlags, ...growth(samples), finish, peakRssMB: peakMB }
  } finally {
    await spill.close()
    await sim.close()
    await rm(dir, { recursive: true, force: true })
  }
}

/** RSS after warm-up, at the end and the growth between: medians of three samples at each end. */
function growth(
  samples: Sample[],
): Pick<SoakFigures, 'samples' | 'rssAfterWarmupMB' | 'rssEndMB' | 'growthMB' | 'growthBytesPerRequest' | 'heapGrowthMB'> {
  const after = samples.slice(Math.max(1, Math.floor(samples.length / 5)))
  const head = after.slice(0, 3)
  const tail = after.slice(-3)
  const growthMB = median(tail.map((s) => s.rssMB)) - median(head.map((s) => s.rssMB))
  const requestsBetween = median(tail.map((s) => s.done)) - median(head.map((s) => s.done))
  return {
    samples: samples.length,
    rssAfterWarmupMB: head[0]?.rssMB ?? Number.NaN,
    rssEndMB: tail.at(-1)?.rssMB ?? Number.NaN,
    growthMB,
    growthBytesPerRequest: requestsBetween > 0 ? (growthMB * 2 ** 20) / requestsBetween : null,
    heapGrowthMB: median(tail.map((s) => s.heapMB)) - median(head.map((s) => s.heapMB)),
  }
}

/** The figures as the bench prints them; the target is scaled to the run's length. */
export function soakReport(f: SoakFigures): string {
  const perRequest = f.growthBytesPerRequest === null ? '—' : `${f.growthBytesPerRequest.toFixed(0)} B/request`
  const projected = f.growthBytesPerRequest === null ? null : (f.growthBytesPerRequest * f.ratePerS * 30 * 60) / 2 ** 20
  return [
    `soak: ${Number(f.minutes.toFixed(2))} min at ${f.ratePerS} req/s, ${f.completed}/${f.requests} completed, ${f.samples} RSS samples`,
    `servegate run under ${f.nodeFlags.length === 0 ? "Node's defaults" : f.nodeFlags.join(' ')}`,
    `RSS after warm-up ${f.rssAfterWarmupMB.toFixed(1)} MB, at the end ${f.rssEndMB.toFixed(1)} MB`,
    `growth ${f.growthMB.toFixed(1)} MB (median of 3 samples each end; ${perRequest}), ` +
      `of which the JS heap V8 reserved ${f.heapGrowthMB.toFixed(1)} MB`,
    `target: under ${TARGET_GROWTH_MB} MB over 30 min after warm-up; at this rate 30 min projects to ` +
      `${projected === null ? '—' : `${projected.toFixed(1)} MB`}`,
    `end of the cell (figures from the spill, record written from it): ${f.finish.seconds.toFixed(1)} s, ` +
      `RSS peak ${f.finish.rssPeakMB.toFixed(1)} MB, record ${f.finish.recordMB.toFixed(1)} MB`,
    `peak RSS of the CLI over the run ${f.peakRssMB.toFixed(1)} MB`,
  ].join('\n')
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '30' },
      rate: { type: 'string', default: '100' },
      json: { type: 'string' },
      'node-defaults': { type: 'boolean', default: false },
    },
  })
  const figures = await soak(Number(values.minutes), Number(values.rate), { nodeDefaults: values['node-defaults'] })
  console.log(soakReport(figures))
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(figures, null, 2)}\n`)
}
