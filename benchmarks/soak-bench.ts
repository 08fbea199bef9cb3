/**
 * `npm run bench:soak [-- --minutes 30] [-- --rate 100] [-- --json FILE]`: does a long cell's
 * memory stay flat? One open-loop cell at a constant rate against the in-process simulated
 * engine for the given minutes, RSS sampled every 10 s (every second under a minute). Prints the
 * RSS after warm-up (the first fifth of the run, at least one sample), at the end, and the
 * growth between the medians of the first and last three samples after warm-up (a busy machine
 * is noisy), against the target: under 20 MB growth over 30 minutes after warm-up. Nothing here
 * fails the run.
 */
import { writeFile } from 'node:fs/promises'
import { parseArgs } from 'node:util'
import { runCell } from '../src/runner/measure-cell.ts'
import { startSimServer } from '../src/sim/server.ts'

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
}

const median = (xs: readonly number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor((s.length - 1) / 2)] as number
}

/** Runs the soak and returns its figures. */
export async function soak(minutes: number, ratePerS: number, log: (line: string) => void = console.log): Promise<SoakFigures> {
  const sim = await startSimServer({ model: 'm', prefillTokPerS: 1_000_000, decodeTokPerS: 2000, batchSlowdown: 0 })
  const requests = Math.round(minutes * 60 * ratePerS)
  const everyMs = minutes < 1 ? 1000 : 10_000
  const samples: Array<{ atS: number; rssMB: number; done: number }> = []
  let done = 0
  const started = performance.now()
  const timer = setInterval(() => {
    const sample = { atS: (performance.now() - started) / 1000, rssMB: process.memoryUsage().rss / 2 ** 20, done }
    samples.push(sample)
    log(`${sample.atS.toFixed(0)} s: RSS ${sample.rssMB.toFixed(1)} MB, ${done} requests done`)
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
      { onProgress: (p) => (done = p.done) },
    )
    const after = samples.slice(Math.max(1, Math.floor(samples.length / 5)))
    const head = after.slice(0, 3)
    const tail = after.slice(-3)
    const growthMB = median(tail.map((s) => s.rssMB)) - median(head.map((s) => s.rssMB))
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
    }
  } finally {
    clearInterval(timer)
    await sim.close()
  }
}

/** The figures as the bench prints them; the target is scaled to the run's length. */
export function soakReport(f: SoakFigures): string {
  const perRequest = f.growthBytesPerRequest === null ? '—' : `${f.growthBytesPerRequest.toFixed(0)} B/request`
  const projected = f.growthBytesPerRequest === null ? null : (f.growthBytesPerRequest * f.ratePerS * 30 * 60) / 2 ** 20
  return [
    `soak: ${Number(f.minutes.toFixed(2))} min at ${f.ratePerS} req/s, ${f.completed}/${f.requests} completed, ${f.samples} RSS samples`,
    `RSS after warm-up ${f.rssAfterWarmupMB.toFixed(1)} MB, at the end ${f.rssEndMB.toFixed(1)} MB`,
    `growth ${f.growthMB.toFixed(1)} MB (median of 3 samples each end; ${perRequest})`,
    `target: under ${TARGET_GROWTH_MB} MB over 30 min after warm-up; at this rate 30 min projects to ` +
      `${projected === null ? '—' : `${projected.toFixed(1)} MB`}`,
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
