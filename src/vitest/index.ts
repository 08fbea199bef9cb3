export { servegate } from './plugin.ts'
export { ServegateOptions, type ResolvedServegateOptions } from './options.ts'
