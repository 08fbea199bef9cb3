import { fileURLToPath } from 'node:url'
import type { Plugin } from 'vite'
import { ServegateReporter } from '../evidence/reporter.ts'
import { type ResolvedServegateOptions, resolveServegateOptions, type ServegateOptions } from './options.ts'

declare module 'vitest' {
  interface ProvidedContext {
    servegate: { evidenceDir: string; nvidiaSmi?: string }
  }
}

const SETUP = fileURLToPath(new URL('./setup.ts', import.meta.url))

/**
 * The servegate vitest plugin: registers the matchers (a setup file), provides the options to
 * the workers, adds the evidence reporter (it writes after `vitest bench` and after
 * `vitest --merge-reports`), and configures `vitest bench` to run `benchmarks/**\/*.bench.ts` one
 * file at a time with long timeouts (cells launch engines and measure for minutes).
 * @example
 * // vitest.config.ts
 * export default defineConfig({ plugins: [servegate({ evidenceDir: 'evidence' })] })
 */
export function servegate(input?: ServegateOptions): Plugin {
  const options: ResolvedServegateOptions = resolveServegateOptions(input)
  return {
    name: 'servegate',
    config(userConfig, env) {
      const bench = env.mode === 'benchmark'
      const reporter = new ServegateReporter({ evidenceDir: options.evidenceDir, redact: options.redact, bench })
      // Appended to the user's reporters when they chose some (configs merge arrays), else beside vitest's default.
      const reporters = userConfig.test?.reporters === undefined ? ['default', reporter] : [reporter]
      return {
        test: {
          setupFiles: [SETUP],
          reporters,
          provide: { servegate: { evidenceDir: options.evidenceDir, ...(options.nvidiaSmi === undefined ? {} : { nvidiaSmi: options.nvidiaSmi }) } },
          benchmark: { include: options.benchInclude },
          ...(bench ? { testTimeout: options.benchTimeoutMs, hookTimeout: options.benchTimeoutMs, fileParallelism: false } : {}),
        },
      }
    },
  }
}
