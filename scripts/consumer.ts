/**
 * servegate as a user meets it: the packed tarball installed, with registry packages only, into
 * a fresh project outside this repository. Shared by the consumer test and the install
 * footprint benchmark.
 */
import { mkdir, mkdtemp, readdir, lstat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { execa, type Options } from 'execa'

export const REPO = fileURLToPath(new URL('..', import.meta.url))

/** The footprint target of `npm i -D servegate vitest`, bytes on disk. */
export const FOOTPRINT_TARGET_BYTES = 150 * 1024 * 1024

/**
 * The environment of a command run in the consumer project: this process's Node (≥ 22.19) first
 * on PATH, so npm and npx run on it as they would on a runner with a current Node; no
 * servegate-specific variables leak in from the repository's own test run.
 */
export function consumerEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith('SERVEGATE_') && !k.startsWith('VITEST') && !k.startsWith('npm_')) env[k] = v
  }
  env.PATH = [dirname(process.execPath), process.env.PATH ?? ''].join(delimiter)
  env.FORCE_COLOR = '0'
  env.NO_COLOR = '1'
  env.GITHUB_STEP_SUMMARY = ''
  return { ...env, ...extra }
}

/** Runs a command of the consumer project (never through a shell); its whole output on failure. */
export async function inProject(
  dir: string,
  file: string,
  args: string[],
  options: Pick<Options, 'timeout'> = {},
): Promise<{ exitCode: number | undefined; stdout: string; stderr: string }> {
  const result = await execa(file, args, {
    cwd: dir,
    env: consumerEnv(),
    extendEnv: false,
    reject: false,
    cleanup: true,
    forceKillAfterDelay: 5000,
    stdin: 'ignore',
    ...options,
  })
  return { exitCode: result.exitCode, stdout: String(result.stdout), stderr: String(result.stderr) }
}

/** `npm pack` of this repository (its prepack builds dist/) into `dest`; the tarball's path. */
export async function packTarball(dest: string): Promise<string> {
  await mkdir(dest, { recursive: true })
  const packed = await inProject(REPO, 'npm', ['pack', '--json', '--pack-destination', dest])
  if (packed.exitCode !== 0) throw new Error(`npm pack failed (${packed.exitCode}):\n${packed.stderr.slice(-3000)}`)
  const [info] = JSON.parse(packed.stdout.slice(packed.stdout.indexOf('['))) as Array<{ filename: string }>
  if (info === undefined) throw new Error(`npm pack printed no tarball: ${packed.stdout.slice(-500)}`)
  return join(dest, info.filename)
}

/** A new, empty project (a package.json and nothing else) in a fresh temporary directory. */
export async function emptyProject(prefix = 'servegate-consumer-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix))
  await writeFile(join(dir, 'package.json'), `${JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }, null, 2)}\n`)
  return dir
}

/** `npm i -D ...packages` in the project, from the registry (and the tarball's path where given). */
export async function npmInstall(dir: string, packages: string[]): Promise<void> {
  const installed = await inProject(dir, 'npm', ['install', '--save-dev', '--no-audit', '--no-fund', ...packages], { timeout: 600_000 })
  if (installed.exitCode !== 0)
    throw new Error(`npm install ${packages.join(' ')} failed (${installed.exitCode}):\n${installed.stderr.slice(-3000)}`)
}

/** Bytes on disk (allocated blocks) and the number of files under a directory; links are not followed. */
export async function diskUsage(dir: string): Promise<{ bytes: number; files: number }> {
  let bytes = 0
  let files = 0
  const walk = async (path: string): Promise<void> => {
    const info = await lstat(path)
    bytes += info.blocks * 512
    if (info.isDirectory()) for (const name of await readdir(path)) await walk(join(path, name))
    else files++
  }
  await walk(dir)
  return { bytes, files }
}
