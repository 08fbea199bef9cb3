// The `servegate/vitest` entry: the plugin for vitest.config.ts.
export { servegate } from './plugin.ts'
export { BENCH_WORKER_NODE_FLAGS } from './plugin-options.ts'
export type { ServegateOptions } from './plugin-options.ts'
