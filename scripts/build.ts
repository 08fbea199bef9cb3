/**
 * Builds the package: compiled ESM JavaScript with `.d.ts` types and source maps (sources
 * inlined, since the tarball ships no TypeScript) from `src/` into a fresh `dist/`. `npm pack`
 * runs it (`prepack`); tests and the demo inside this repository run the sources directly.
 *
 *     node scripts/build.ts
 */
import { rm } from 'node:fs/promises'
import { createRequire } from 'node:module'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const TSC = createRequire(import.meta.url).resolve('typescript/bin/tsc')

await rm(new URL('../dist', import.meta.url), { recursive: true, force: true })
const result = await execa(process.execPath, [TSC, '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit', reject: false })
if (result.exitCode !== 0) {
  process.stderr.write(`build: tsc -p tsconfig.build.json exited ${result.exitCode}\n`)
  process.exit(result.exitCode ?? 1)
}
