import { fileURLToPath } from 'node:url'
import type { Plugin } from 'vitest/config'
import { ServegateProgressReporter } from '../evidence/progress-reporter.ts'
import { ServegateReporter } from '../evidence/reporter.ts'
import {
  benchWorkerFlagsToAdd,
  type ResolvedServegateOptions,
  resolveServegateOptions,
  type ServegateOptions,
  workerOptionsOf,
} from './plugin-options.ts'
import { flagsThisNodeTakes, v8OptionsOf } from '../node-flags.ts'

// The setup file beside this module: setup.ts in a clone of the repository, setup.js in the package.
const SETUP = fileURLToPath(new URL(import.meta.url.endsWith('.ts') ? './setup.ts' : './setup.js', import.meta.url))

/**
 * The servegate vitest plugin: registers the matchers (a setup file), provides the options to
 * the workers, adds the evidence reporter (it writes after `vitest bench` and after
 * `vitest --merge-reports`), and configures `vitest bench` to run `benchmarks/**\/*.bench.ts` one
 * file at a time with long timeouts (`benchTimeoutMs`: cells launch engines and measure for minutes)
 * and with the client's V8 flags on its forked workers (`workerNodeFlags`).
 *
 * Each cell's phase (launching, waiting for readiness with its log, calibrating, warm-up, n/N
 * requests, tearing down) is shown while `vitest bench` runs, unless `progress: false`.
 *
 * Under each spec file, the decisive figure of each gate is printed for passing tests too. A run
 * that did not cover the suite (a file list, `-t`) writes evidence marked partial, and never over
 * a complete run's unless `partialEvidence: 'replace'`.
 *
 * The evidence reporter is kept whatever reporters the config or the command line chose
 * (`--reporter=blob` on a shard, `--reporter=verbose`): it is added to vitest's resolved list
 * once, so the evidence of a run is never silently left stale.
 * @example
 * // vitest.config.ts
 * export default defineConfig({ plugins: [servegate({ evidenceDir: 'evidence' })] })
 */
export function servegate(input?: ServegateOptions): Plugin {
  const options: ResolvedServegateOptions = resolveServegateOptions(input)
  const workerFlagsChosen = input?.workerNodeFlags !== undefined
  const reporter = new ServegateReporter({
    evidenceDir: options.evidenceDir,
    redact: options.redact,
    partialEvidence: options.partialEvidence,
    ...(options.noise === undefined ? {} : { noise: options.noise }),
  })
  const progress = options.progress ? new ServegateProgressReporter() : null
  return {
    name: 'servegate',
    config() {
      return {
        test: {
          setupFiles: [SETUP],
          provide: {
            // What the workers read of the options: the GPU probe's nvidia-smi, the inconclusive policy.
            servegate: workerOptionsOf(options),
          },
          // vitest 5 runs these as the "bench" variant of the project, one file at a time.
          benchmark: { include: options.benchInclude },
        },
      }
    },
    // Runs once per project after the config (command line included) is resolved and before
    // vitest builds its reporters from it or serializes a project's config for its workers.
    configureVitest({ vitest, project }) {
      const reporters = vitest.config.reporters
      if (!reporters.some((r) => r === reporter)) reporters.push(reporter)
      // After vitest's own reporters: it wraps their output stream once the run starts.
      if (progress !== null && !reporters.some((r) => r === progress)) reporters.push(progress)
      // The bench variant of a project (vitest 5 gives it at least 60 s per test, 120 s per
      // hook) gets the long timeouts cells need: a test awaiting a pair waits for engines to load.
      if (project.config.benchmark?.enabled === true) {
        project.config.testTimeout = options.benchTimeoutMs
        project.config.hookTimeout = options.benchTimeoutMs
        // Read when vitest builds the project's tasks, after this hook.
        const added = benchWorkerFlagsToAdd(project.config.pool, project.config.execArgv, options.workerNodeFlags)
        if (added.length > 0)
          project.config.execArgv = [...project.config.execArgv, ...flagsThisNodeTakes(added, workerFlagsChosen, v8OptionsOf())]
      }
    },
  }
}
