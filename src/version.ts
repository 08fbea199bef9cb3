import { createRequire } from 'node:module'

// package.json sits one level above both src/ and dist/; read at run time, since an import
// of it would put a copy of package.json into the build.
const pkg = createRequire(import.meta.url)('../package.json') as { version: string }

/** The servegate version recorded in every run record. */
export const SERVEGATE_VERSION: string = pkg.version
