import { fileURLToPath } from 'node:url'
import type { Plugin } from 'vite'
import { ServegateReporter } from '../evidence/reporter.ts'
import { type ResolvedServegateOptions, resolveServegateOptions, type ServegateOptions } from './options.ts'

declare module 'vitest' {
  interface ProvidedContext {
    servegate: { evidenceDir: string; benchTimeoutMs: number; nvidiaSmi?: string }
  }
}

const SETUP = fileURLToPath(new URL('./setup.ts', import.meta.url))

/**
 * The servegate vitest plugin: registers the matchers (a setup file), provides the options to
 * the workers, adds the evidence reporter (it writes after `vitest bench` and after
 * `vitest --merge-reports`), and configures `vitest bench` to run `benchmarks/**\/*.bench.ts` one
 * file at a time with long timeouts (cells launch engines and measure for minutes; the setup
 * file sets them for the bench project's files).
 * @example
 * // vitest.config.ts
 * export default defineConfig({ plugins: [servegate({ evidenceDir: 'evidence' })] })
 */
export function servegate(input?: ServegateOptions): Plugin {
  const options: ResolvedServegateOptions = resolveServegateOptions(input)
  return {
    name: 'servegate',
    config(userConfig) {
      const reporter = new ServegateReporter({ evidenceDir: options.evidenceDir, redact: options.redact })
      // Appended to the user's reporters when they chose some (configs merge arrays), else beside vitest's default.
      const reporters = userConfig.test?.reporters === undefined ? ['default', reporter] : [reporter]
      return {
        test: {
          setupFiles: [SETUP],
          reporters,
          provide: {
            servegate: { evidenceDir: options.evidenceDir, benchTimeoutMs: options.benchTimeoutMs, ...(options.nvidiaSmi === undefined ? {} : { nvidiaSmi: options.nvidiaSmi }) },
          },
          // vitest 5 runs these as the "bench" variant of the project, one file at a time; the setup
          // file gives them the long timeouts.
          benchmark: { include: options.benchInclude },
        },
      }
    },
  }
}
