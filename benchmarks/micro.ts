import { Bench } from 'tinybench'
import { createSseParser, parseSse } from '../src/client/sse.ts'
import { distribution } from '../src/metrics/distribution.ts'
import { createRandom as mulberry32 } from '../src/random.ts'
import { responseRead } from './chunks.ts'

/** One hot-path micro-benchmark's figures. */
export interface MicroResult {
  name: string
  /** Median ops/s over tinybench's samples. */
  opsPerS: number
  /** Median time per op, µs. */
  opUs: number
  /** Samples tinybench took. */
  samples: number
  /** Units of work per op (SSE events, or values), their name, and the derived rate per second. */
  itemsPerOp: number
  itemLabel: string
  itemsPerS: number
}

/** Bytes of the simulated socket read: the size a busy stream hands the client at once. */
export const READ_BYTES = 64 * 1024

/**
 * tinybench micro-benchmarks of the client's hot paths: SSE splitting of a 64 KiB read of
 * vLLM chat chunks, the same plus `JSON.parse` of each event, and `distribution()` of 10k values.
 * @param timeMs time budget per task
 */
export async function runMicro(timeMs: number): Promise<MicroResult[]> {
  const read = responseRead(READ_BYTES)
  const eventsPerRead = parseSse([read]).length
  const random = mulberry32(42)
  const values = Array.from({ length: 10_000 }, () => 5 + random() * 20)

  let sink = 0
  const bench = new Bench({ time: timeMs, warmupTime: Math.min(200, timeMs) })
  bench
    .add('sse push, 64 KiB read', () => {
      createSseParser((data) => (sink += data.length)).push(read)
    })
    .add('sse push + JSON.parse, 64 KiB read', () => {
      createSseParser((data) => (sink += (JSON.parse(data) as { created: number }).created)).push(read)
    })
    .add('distribution(), 10k values', () => {
      sink += distribution(values).p99 ?? 0
    })
  await bench.run()
  if (!Number.isFinite(sink)) throw new Error('micro-benchmark sink is not finite')

  const perOp: Record<string, [number, string]> = {
    'sse push, 64 KiB read': [eventsPerRead, 'events'],
    'sse push + JSON.parse, 64 KiB read': [eventsPerRead, 'events'],
    'distribution(), 10k values': [values.length, 'values'],
  }
  return bench.tasks.map((task) => {
    const result = task.result
    if (result.state !== 'completed') {
      const why = result.state === 'errored' ? `: ${String(result.error)}` : ''
      throw new Error(`micro-benchmark "${task.name}" ended ${result.state}${why}`)
    }
    const [itemsPerOp, itemLabel] = perOp[task.name] ?? [1, 'ops']
    const opsPerS = result.throughput.p50
    return {
      name: task.name,
      opsPerS,
      opUs: result.latency.p50 * 1000,
      samples: result.latency.samplesCount,
      itemsPerOp,
      itemsPerS: opsPerS * itemsPerOp,
      itemLabel,
    }
  })
}
