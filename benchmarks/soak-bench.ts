/**
 * `npm run bench:soak [-- --minutes 30] [-- --rate 100] [-- --json FILE]`: does a long cell's
 * memory stay flat? One open-loop cell at a constant rate, its requests spilled to disk as
 * `servegate run` spills them, against the simulated engine in a process of its own (so only
 * the client's memory is counted), for the given minutes. RSS is sampled every 10 s (every
 * second under a minute) while the requests run. Prints the RSS after warm-up (the first fifth
 * of the run, at least one sample), at the end, and the growth between the medians of the first
 * and last three samples after warm-up (a busy machine is noisy), against the target: under
 * 20 MB growth over 30 minutes after warm-up. Then, apart, the cost of the end: the figures
 * read back from the spill and the record written from it (its time and the RSS peak it
 * reaches). Nothing here fails the run.
 */
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { execa } from 'execa'
import { RequestSpill, writeSpilledRecord } from '../src/record/request-spill.ts'
import { runCell } from '../src/runner/measure-cell.ts'
import { median } from './report.ts'

const TARGET_GROWTH_MB = 20

export interface SoakFigures {
  minutes: number
  ratePerS: number
  requests: number
  completed: number
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
}

const BIN = fileURLToPath(new URL('../bin/servegate.js', import.meta.url))

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

/** Runs the soak and returns its figures. */
export async function soak(minutes: number, ratePerS: number, log: (line: string) => void = console.log): Promise<SoakFigures> {
  const sim = await startSimProcess()
  const dir = await mkdtemp(join(tmpdir(), 'servegate-soak-'))
  const spill = await RequestSpill.create(join(dir, 'soak.json.requests.jsonl'))
  const requests = Math.round(minutes * 60 * ratePerS)
  const everyMs = minutes < 1 ? 1000 : 10_000
  const samples: Array<{ atS: number; rssMB: number; heapMB: number; done: number }> = []
  let done = 0
  let measuring = true
  const started = performance.now()
  const timer = setInterval(() => {
    if (!measuring) return
    const m = process.memoryUsage()
    const sample = { atS: (performance.now() - started) / 1000, rssMB: m.rss / 2 ** 20, heapMB: m.heapTotal / 2 ** 20, done }
    samples.push(sample)
    // The JS heap V8 holds (used or not) and what it holds live, apart from the rest of RSS.
    const live = `heap ${(m.heapUsed / 2 ** 20).toFixed(1)} of ${sample.heapMB.toFixed(1)} MB, external ${(m.external / 2 ** 20).toFixed(1)} MB`
    log(`${sample.atS.toFixed(0)} s: RSS ${sample.rssMB.toFixed(1)} MB (${live}), ${done} requests done`)
  }, everyMs)
  try {
    const record = await runCell(
      {
        baseUrl: sim.url,
        model: 'm',
        requests,
        maxTokens: 16,
        calibrate: false,
        workload: { promptTokens: 256 },
        arrival: { kind: 'constant', ratePerS },
      },
      {
        spill,
        onProgress: (p) => {
          done = p.done
          if (done === requests) measuring = false
        },
      },
    )
    const finishStarted = performance.now()
    let rssPeakMB = process.memoryUsage().rss / 2 ** 20
    const peak = setInterval(() => (rssPeakMB = Math.max(rssPeakMB, process.memoryUsage().rss / 2 ** 20)), 100)
    const out = join(dir, 'soak.json')
    await writeSpilledRecord(out, record, spill)
    clearInterval(peak)
    rssPeakMB = Math.max(rssPeakMB, process.memoryUsage().rss / 2 ** 20)
    const finish = { seconds: (performance.now() - finishStarted) / 1000, rssPeakMB, recordMB: (await stat(out)).size / 2 ** 20 }
    const after = samples.slice(Math.max(1, Math.floor(samples.length / 5)))
    const head = after.slice(0, 3)
    const tail = after.slice(-3)
    const growthMB = median(tail.map((s) => s.rssMB)) - median(head.map((s) => s.rssMB))
    const heapGrowthMB = median(tail.map((s) => s.heapMB)) - median(head.map((s) => s.heapMB))
    const requestsBetween = median(tail.map((s) => s.done)) - median(head.map((s) => s.done))
    return {
      minutes,
      ratePerS,
      requests,
      completed: record.completed,
      samples: samples.length,
      rssAfterWarmupMB: head[0]?.rssMB ?? Number.NaN,
      rssEndMB: tail.at(-1)?.rssMB ?? Number.NaN,
      growthMB,
      growthBytesPerRequest: requestsBetween > 0 ? (growthMB * 2 ** 20) / requestsBetween : null,
      heapGrowthMB,
      finish,
    }
  } finally {
    clearInterval(timer)
    await spill.remove()
    await sim.close()
    await rm(dir, { recursive: true, force: true })
  }
}

/** The figures as the bench prints them; the target is scaled to the run's length. */
export function soakReport(f: SoakFigures): string {
  const perRequest = f.growthBytesPerRequest === null ? '—' : `${f.growthBytesPerRequest.toFixed(0)} B/request`
  const projected = f.growthBytesPerRequest === null ? null : (f.growthBytesPerRequest * f.ratePerS * 30 * 60) / 2 ** 20
  return [
    `soak: ${Number(f.minutes.toFixed(2))} min at ${f.ratePerS} req/s, ${f.completed}/${f.requests} completed, ${f.samples} RSS samples`,
    `RSS after warm-up ${f.rssAfterWarmupMB.toFixed(1)} MB, at the end ${f.rssEndMB.toFixed(1)} MB`,
    `growth ${f.growthMB.toFixed(1)} MB (median of 3 samples each end; ${perRequest}), ` +
      `of which the JS heap V8 reserved ${f.heapGrowthMB.toFixed(1)} MB`,
    `target: under ${TARGET_GROWTH_MB} MB over 30 min after warm-up; at this rate 30 min projects to ` +
      `${projected === null ? '—' : `${projected.toFixed(1)} MB`}`,
    `end of the cell (figures from the spill, record written from it): ${f.finish.seconds.toFixed(1)} s, ` +
      `RSS peak ${f.finish.rssPeakMB.toFixed(1)} MB, record ${f.finish.recordMB.toFixed(1)} MB`,
  ].join('\n')
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { minutes: { type: 'string', default: '30' }, rate: { type: 'string', default: '100' }, json: { type: 'string' } },
  })
  const figures = await soak(Number(values.minutes), Number(values.rate))
  console.log(soakReport(figures))
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(figures, null, 2)}\n`)
}
