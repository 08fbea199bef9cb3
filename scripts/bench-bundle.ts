/**
 * Packs what `bench:client`'s scale ladder needs on a many-core runner that has neither Node nor
 * a network (an air-gapped GPU box): this Node binary, the package's runtime dependencies and a
 * fresh `dist/`, as one `.bench-bundle/bundle.tar.xz` (a few tens of MB). Copy the repository
 * with that folder to the runner and run `scripts/bench-offline.sh` there
 * (docs/client-benchmark.md).
 *
 *     npm run bench:bundle
 *
 * Needs `xz` and `tar` here (Debian: xz-utils).
 */
import { mkdir, rm, stat } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { execa } from 'execa'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const OUT = '.bench-bundle'

/** The runtime dependency folders (`node_modules/…`, relative), as npm resolves them without dev dependencies. */
async function runtimeModules(): Promise<string[]> {
  const { stdout } = await execa('npm', ['ls', '--omit=dev', '--all', '--parseable'], { cwd: ROOT, reject: false, stdin: 'ignore' })
  const prefix = `${ROOT.replace(/\/$/, '')}/`
  const dirs = stdout
    .split('\n')
    .filter((line) => line.startsWith(`${prefix}node_modules/`))
    .map((line) => line.slice(prefix.length))
  if (dirs.length === 0) throw new Error('npm ls --omit=dev listed no dependencies: run npm ci first')
  return [...new Set(dirs)].sort()
}

await execa('xz', ['--version'], { stdin: 'ignore' }).catch(() => {
  throw new Error('bench-bundle needs xz (Debian: apt-get install xz-utils)')
})
await execa(process.execPath, [fileURLToPath(new URL('./build.ts', import.meta.url))], { cwd: ROOT, stdio: 'inherit' })
await rm(new URL(`../${OUT}`, import.meta.url), { recursive: true, force: true })
await mkdir(new URL(`../${OUT}/bin`, import.meta.url), { recursive: true })
const node = `${OUT}/bin/node`
await execa('cp', [process.execPath, node], { cwd: ROOT })
const modules = await runtimeModules()
// Nested folders are inside their parents already; tar takes each top-level one once.
const tops = modules.filter((dir) => !modules.some((other) => other !== dir && dir.startsWith(`${other}/`)))
await execa('tar', ['-cf', `${OUT}/bundle.tar`, node, 'dist', ...tops], { cwd: ROOT })
await rm(new URL(`../${OUT}/bin`, import.meta.url), { recursive: true })
await execa('xz', ['-T0', '-6', `${OUT}/bundle.tar`], { cwd: ROOT })
const size = (await stat(new URL(`../${OUT}/bundle.tar.xz`, import.meta.url))).size
process.stdout.write(
  `${OUT}/bundle.tar.xz: ${(size / 2 ** 20).toFixed(1)} MiB (Node ${process.version}, ${tops.length} dependency folders, dist/)\n`,
)
