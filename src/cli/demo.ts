import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { ServegateError } from '../errors.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './io.ts'
import { runCommand } from './run.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const LISTENING = /servegate sim listening on (http:\/\/\S+)/

/** Simulated engine flags of the demo: a small batching engine with two injected faults. */
const SIM_ARGS = [
  '--port', '0', '--model', 'sim-demo',
  '--prefill-tok-per-s', '20000', '--decode-tok-per-s', '150', '--batch-slowdown', '0.15',
  '--tokens-per-chunk', '2', '--reasoning-tokens', '16',
  '--fault', 'http500:9', '--fault', 'drop:21',
]

/**
 * `servegate demo`: starts the simulated engine in a child process (its own event loop, so it
 * does not distort the client's clock), runs one cell against it, prints the summary, and
 * always tears the child down.
 */
export async function demoCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('demo', argv, { out: { type: 'string' }, help: { type: 'boolean', short: 'h' } })
  if (values.help === true) {
    io.stdout.write('servegate demo [--out FILE] — run a cell (chat, C=4, 48 requests, canaries, observed output control) against the simulated engine\n')
    return 0
  }
  const sim = execa(process.execPath, [BIN, 'sim', ...SIM_ARGS], {
    stdout: 'pipe',
    stderr: 'pipe',
    cleanup: true,
    forceKillAfterDelay: 2000,
    reject: false,
  })
  try {
    const baseUrl = await new Promise<string>((resolve, reject) => {
      let seen = ''
      const timer = setTimeout(() => reject(new ServegateError('INTERNAL', `the simulated engine did not start within 10 s: ${seen.slice(-300)}`)), 10_000)
      sim.stdout.on('data', (bytes: Buffer) => {
        seen += bytes.toString()
        const match = LISTENING.exec(seen)
        if (match !== null) {
          clearTimeout(timer)
          resolve(match[1] as string)
        }
      })
      sim.stderr.on('data', (bytes: Buffer) => (seen += bytes.toString()))
      void sim.then((result) => {
        clearTimeout(timer)
        reject(new ServegateError('INTERNAL', `the simulated engine exited (code ${result.exitCode}): ${seen.slice(-300)}`))
      })
    })
    io.stdout.write(`simulated engine at ${baseUrl} (two faults injected: its 10th request gets HTTP 500, its 22nd drops mid-stream; warm-ups count)\n\n`)
    return await runCommand(
      [
        '--base-url', baseUrl, '--model', 'sim-demo', '--concurrency', '4', '--requests', '48', '--warmup', '4',
        '--prompt-tokens', '512', '--max-tokens', '64', '--canaries', '--output-control', 'observe',
        '--out', values.out ?? 'servegate-runs/demo.json',
      ],
      io,
      signal,
    )
  } finally {
    sim.kill('SIGTERM')
    await sim
  }
}
