import { ServegateError } from '../errors.ts'
import { SERVEGATE_VERSION } from '../version.ts'
import { INTERRUPT_SIGNALS, Interrupted, type InterruptSignal } from './interrupt.ts'
import { type CliIo, scrubbingIo } from './cli-io.ts'

const HELP = `servegate ${SERVEGATE_VERSION} — LLM-serving benchmarks as assertions

  servegate init [--dir DIR] [--force]              set up a repository: vitest config, a spec, the CI workflow (servegate init --help)
  servegate run --base-url URL --model NAME [...]   measure one cell (servegate run --help)
  servegate capacity --slo ttft=MS --start V [...]  find the highest rate meeting an SLO (servegate capacity --help)
  servegate calibrate --engine FILE [--launches K]  measure the runner's launch-to-launch noise (servegate calibrate --help)
  servegate summarize FILE [--json]                 recompute a run record's distributions
  servegate import FILE --from FORMAT --out FILE    convert vLLM / SGLang / anvil results (servegate import --help)
  servegate rescore RECORD... [--dataset FILE]      judge a dataset run's kept replies again after a scorer fix (servegate rescore --help)
  servegate sim [--port P ...]                      start the simulated engine (servegate sim --help)
  servegate demo [--sim]                            in a clone of servegate: its example suite on the embedded engine
  servegate verify EVIDENCE_DIR                     recompute every sha256 and summary of an evidence directory (servegate verify --help)
  servegate report EVIDENCE_DIR                     render the board, charts and index.html again
  servegate compare BASELINE_RUN CANDIDATE_RUN      pair checks and default gates on two run records
  servegate --version`

/**
 * The CLI entry: dispatches to a command and turns every ServegateError into one line on
 * stderr and exit code 2 (1 for failures after load started); never prints a stack trace
 * for an expected error. Exit codes of `run`: docs/cli.md.
 */
export async function main(argv: string[], given: CliIo = { stdout: process.stdout, stderr: process.stderr }): Promise<number> {
  // Every line the CLI prints passes here, so no command can print a secret it was given.
  const io = scrubbingIo(given)
  const [command, ...rest] = argv
  const controller = new AbortController()
  // Ctrl-C, SIGTERM and SIGHUP (a dropped SSH session) all stop the command the same way: the
  // partial record is written and the exit code says which (128 + the signal's number).
  const handlers = INTERRUPT_SIGNALS.map((name: InterruptSignal) => {
    const handler = (): void => {
      // After a hang-up the terminal is gone: a failed write must not crash the record's writing.
      if (name === 'SIGHUP') for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {})
      if (!controller.signal.aborted) controller.abort(new Interrupted(name))
    }
    return [name, handler] as const
  })
  // `on`, not `once`: other listeners (engine teardown) decide whether to re-raise by counting us.
  for (const [name, handler] of handlers) process.on(name, handler)
  try {
    // Each command is loaded when run: a measuring `run` holds none of the others' code (the sim's
    // node:http server, the evidence renderers), some 10 MB of a cell's memory.
    switch (command) {
      case 'init':
        return await (await import('./init.ts')).initCommand(rest, io)
      case 'run':
        return await (await import('./run-command.ts')).runCommand(rest, io, controller.signal)
      case 'capacity':
        return await (await import('./capacity-command.ts')).capacityCommand(rest, io, controller.signal)
      case 'calibrate':
        return await (await import('./calibrate-command.ts')).calibrateCommand(rest, io, controller.signal)
      case 'summarize':
        return await (await import('./summarize-command.ts')).summarizeCommand(rest, io)
      case 'import':
        return await (await import('./import.ts')).importCommand(rest, io)
      case 'rescore':
        return await (await import('./rescore-command.ts')).rescoreCommand(rest, io)
      case 'sim':
        return await (await import('./sim.ts')).simCommand(rest, io, controller.signal)
      case 'demo':
        return await (await import('./demo.ts')).demoCommand(rest, io, controller.signal)
      case 'verify':
        return await (await import('./evidence-commands.ts')).verifyCommand(rest, io)
      case 'report':
        return await (await import('./evidence-commands.ts')).reportCommand(rest, io)
      case 'compare':
        return await (await import('./evidence-commands.ts')).compareCommand(rest, io)
      case '--version':
      case '-v':
        io.stdout.write(`${SERVEGATE_VERSION}\n`)
        return 0
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        io.stdout.write(`${HELP}\n`)
        return command === undefined ? 2 : 0
      default:
        throw new ServegateError('CONFIG_INVALID', `unknown command "${command}"; run servegate --help`)
    }
  } catch (err) {
    if (err instanceof ServegateError) {
      io.stderr.write(`servegate: ${err.message}\n`)
      return err.code === 'CONFIG_INVALID' ? 2 : 1
    }
    io.stderr.write(`servegate: internal error: ${(err as Error).message}\n`)
    return 1
  } finally {
    for (const [name, handler] of handlers) process.off(name, handler)
  }
}
