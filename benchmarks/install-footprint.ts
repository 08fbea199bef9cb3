/**
 * `npm run bench:install`: what `npm i -D servegate vitest` puts on disk in a fresh project,
 * with the tarball `npm pack` makes of this checkout and every other package from the registry.
 * Prints bytes on disk (allocated blocks), files and packages against the 150 MB target.
 *
 *     node benchmarks/install-footprint.ts [--json FILE]
 */
import { existsSync } from 'node:fs'
import { readdir, rm, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { diskUsage, emptyProject, FOOTPRINT_TARGET_BYTES, npmInstall, packTarball } from '../scripts/consumer.ts'

const { values } = parseArgs({ options: { json: { type: 'string' } } })
const MB = 1024 * 1024

/** Packages installed, nested ones included (what npm's "added N packages" counts). */
async function packages(modules: string): Promise<number> {
  let n = 0
  for (const name of await readdir(modules)) {
    if (name.startsWith('.')) continue
    const dirs = name.startsWith('@') ? (await readdir(join(modules, name))).map((d) => join(modules, name, d)) : [join(modules, name)]
    for (const dir of dirs) {
      n++
      const nested = join(dir, 'node_modules')
      if (existsSync(nested)) n += await packages(nested)
    }
  }
  return n
}

const packDir = await emptyProject('servegate-pack-')
const project = await emptyProject('servegate-footprint-')
try {
  const tarball = await packTarball(packDir)
  const started = performance.now()
  await npmInstall(project, [tarball, 'vitest@^5.1.2'])
  const seconds = (performance.now() - started) / 1000
  const modules = join(project, 'node_modules')
  const { bytes, files } = await diskUsage(modules)
  const tarballBytes = (await diskUsage(tarball)).bytes
  const result = {
    bytes,
    files,
    packages: await packages(modules),
    installSeconds: seconds,
    tarballBytes,
    targetBytes: FOOTPRINT_TARGET_BYTES,
  }
  console.log(
    `npm i -D servegate vitest: ${(bytes / MB).toFixed(1)} MB on disk in ${files} files, ${result.packages} packages ` +
      `(target ≤ ${FOOTPRINT_TARGET_BYTES / MB} MB): ${bytes <= FOOTPRINT_TARGET_BYTES ? 'met' : 'MISSED'}`,
  )
  console.log(
    `servegate's tarball: ${(tarballBytes / 1024).toFixed(0)} KiB; install took ${seconds.toFixed(1)} s (network and npm cache dependent)`,
  )
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(result, null, 2)}\n`)
  process.exitCode = bytes <= FOOTPRINT_TARGET_BYTES ? 0 : 1
} finally {
  await rm(packDir, { recursive: true, force: true })
  await rm(project, { recursive: true, force: true })
}
