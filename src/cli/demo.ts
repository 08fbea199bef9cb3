import { existsSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'
import { ServegateError } from '../errors.ts'
import { glanceLines } from '../evidence/board.ts'
import { readIndex, verifyEvidence } from '../evidence/verify.ts'
import { NODE_LLAMA_CPP_MISSING, nodeLlamaCppInstalled } from '../engines/node-llama-cpp.ts'
import { parseFlags } from './flags.ts'
import type { CliIo } from './cli-io.ts'
import { runCommand } from './run-command.ts'

const BIN = fileURLToPath(new URL('../../bin/servegate.js', import.meta.url))
const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** The example suite: the tiny generated model in-process, a fair pair, a sequential pair, an unfair pair. */
const DEMO_SUITE = 'benchmarks/cpu-pair.bench.ts'
const EVIDENCE = 'evidence'
const LISTENING = /servegate sim listening on (http:\/\/\S+)/

/** Simulated engine flags of the demo: a small batching engine with two injected faults. */
const SIM_ARGS = [
  '--port',
  '0',
  '--model',
  'sim-demo',
  '--prefill-tok-per-s',
  '20000',
  '--decode-tok-per-s',
  '150',
  '--batch-slowdown',
  '0.15',
  '--tokens-per-chunk',
  '2',
  '--reasoning-tokens',
  '16',
  '--fault',
  'http500:9',
  '--fault',
  'drop:21',
]

const DEMO_HELP = `servegate demo [--sim [--out FILE]]

  (default)  run the example suite (${DEMO_SUITE}) with vitest bench on the embedded engine
             (in-process llama.cpp, the generated tiny model), write ${EVIDENCE}/ (board, charts,
             index.html, run records, SHA256SUMS), verify it, and print the at-a-glance lines
  --sim      instead measure one cell (chat, C=4, 48 requests, canaries) against the simulated engine`

/**
 * `servegate demo`: the example suite under `vitest bench` (its default reporter is the
 * progress display), then the evidence it wrote, verified, in a few lines.
 */
export async function demoCommand(argv: string[], io: CliIo, signal?: AbortSignal): Promise<number> {
  const { values } = parseFlags('demo', argv, { sim: { type: 'boolean' }, out: { type: 'string' }, help: { type: 'boolean', short: 'h' } })
  if (values.help === true) {
    io.stdout.write(`${DEMO_HELP}\n`)
    return 0
  }
  if (values.sim === true) return simDemo(values.out, io, signal)
  if (values.out !== undefined) throw new ServegateError('CONFIG_INVALID', '--out goes with --sim; the suite demo writes evidence/')
  if (!existsSync(join(ROOT, DEMO_SUITE))) {
    throw new ServegateError(
      'CONFIG_INVALID',
      "the suite demo runs servegate's own example suite, which only a clone of the servegate repository has " +
        '(npm ci && npm run demo there); in your project, `npx servegate init` then `npx vitest bench --run` runs a pair ' +
        'on the simulated engine, and `npx servegate demo --sim` measures one cell now',
    )
  }
  if (!nodeLlamaCppInstalled()) throw new ServegateError('ENGINE_NOT_FOUND', `servegate demo: ${NODE_LLAMA_CPP_MISSING}`)
  const vitest = join(dirname(createRequire(import.meta.url).resolve('vitest/package.json')), 'vitest.mjs')
  io.stdout.write(`servegate demo: ${DEMO_SUITE} on the embedded engine (node-llama-cpp, tiny generated model, 1 thread)\n`)
  const run = execa(process.execPath, [vitest, 'bench', '--run', DEMO_SUITE], {
    cwd: ROOT,
    stdout: 'pipe',
    stderr: 'pipe',
    cleanup: true,
    forceKillAfterDelay: 5000,
    reject: false,
    cancelSignal: signal,
    env: { FORCE_COLOR: io.stdout.isTTY === true ? '1' : '0' },
  })
  run.stdout.on('data', (b: Buffer) => io.stdout.write(b))
  run.stderr.on('data', (b: Buffer) => io.stderr.write(b))
  const result = await run
  const dir = join(ROOT, EVIDENCE)
  const index = await readIndex(dir)
  const verified = await verifyEvidence(dir)
  io.stdout.write('\nAt a glance\n')
  for (const line of glanceLines(index)) io.stdout.write(`  ${line}\n`)
  io.stdout.write(
    `\nBoard    ${EVIDENCE}/README.md\nCharts   ${EVIDENCE}/charts/\nPage     ${EVIDENCE}/index.html\n` +
      `Index    ${EVIDENCE}/index.json (run records in ${EVIDENCE}/runs/)\n`,
  )
  io.stdout.write(
    verified.problems.length === 0
      ? `Verified ${verified.files} files and ${verified.records} run records (servegate verify ${EVIDENCE})\n`
      : `VERIFY FAILED: ${verified.problems.join('; ')}\n`,
  )
  return result.exitCode === 0 && verified.problems.length === 0 ? 0 : 1
}

/**
 * `servegate demo --sim`: starts the simulated engine in a child process (its own event loop,
 * so it does not distort the client's clock), runs one cell against it, prints the summary,
 * and always tears the child down.
 */
async function simDemo(out: string | undefined, io: CliIo, signal?: AbortSignal): Promise<number> {
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
      const timer = setTimeout(
        () => reject(new ServegateError('INTERNAL', `the simulated engine did not start within 10 s: ${seen.slice(-300)}`)),
        10_000,
      )
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
    io.stdout.write(
      `simulated engine at ${baseUrl} (two faults injected: its 10th request gets HTTP 500, its 22nd drops mid-stream; warm-ups count)\n\n`,
    )
    return await runCommand(
      [
        '--base-url',
        baseUrl,
        '--model',
        'sim-demo',
        '--concurrency',
        '4',
        '--requests',
        '48',
        '--warmup',
        '4',
        '--prompt-tokens',
        '512',
        '--max-tokens',
        '64',
        '--canaries',
        '--output-control',
        'observe',
        '--out',
        out ?? 'servegate-runs/demo.json',
      ],
      io,
      signal,
    )
  } finally {
    sim.kill('SIGTERM')
    await sim
  }
}
