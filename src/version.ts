import pkg from '../package.json' with { type: 'json' }

/** The servegate version recorded in every run record. */
export const SERVEGATE_VERSION: string = pkg.version
