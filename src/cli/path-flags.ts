import { constants } from 'node:fs'
import { access, stat } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { ServegateError } from '../errors.ts'

async function statOrNull(path: string): Promise<Awaited<ReturnType<typeof stat>> | null> {
  try {
    return await stat(path)
  } catch (err) {
    // ENOTDIR: a component of the path is a file; the caller walks up to it.
    const code = (err as { code?: string }).code
    if (code === 'ENOENT' || code === 'ENOTDIR') return null
    throw err
  }
}

/**
 * Checks, before anything runs, that a file can be written at `path`: it is not a directory, and
 * its nearest existing ancestor is a directory this user may write in (the missing ones are
 * created). An existing file is replaced, atomically.
 * @throws ServegateError CONFIG_INVALID naming `flag` and the fix
 */
export async function checkWritableFile(flag: string, path: string): Promise<void> {
  const abs = resolve(path)
  const target = await statOrNull(abs)
  if (target?.isDirectory() === true)
    throw new ServegateError(
      'CONFIG_INVALID',
      `${flag}: ${path} is a directory; pass a file path, e.g. ${path.replace(/\/+$/, '')}/run.json`,
    )
  if (target !== null && !target.isFile()) throw new ServegateError('CONFIG_INVALID', `${flag}: ${path} is not a regular file`)
  let dir = dirname(abs)
  let found = await statOrNull(dir)
  while (found === null && dirname(dir) !== dir) {
    dir = dirname(dir)
    found = await statOrNull(dir)
  }
  if (found === null || !found.isDirectory())
    throw new ServegateError('CONFIG_INVALID', `${flag}: ${dir} is a file, not a directory; pass a path in a directory`)
  try {
    await access(dir, constants.W_OK)
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `${flag}: cannot write in ${dir} (permission denied); pass a path in a writable directory`, {
      cause: error,
    })
  }
}

/**
 * Checks, before anything runs, that `path` is a regular file this user may read.
 * @throws ServegateError CONFIG_INVALID naming `flag` and what to pass
 */
export async function checkReadableFile(flag: string, path: string, what: string): Promise<void> {
  const found = await statOrNull(resolve(path))
  if (found === null) throw new ServegateError('CONFIG_INVALID', `${flag}: ${path} does not exist; pass the path of ${what}`)
  if (!found.isFile()) throw new ServegateError('CONFIG_INVALID', `${flag}: ${path} is not a regular file; pass the path of ${what}`)
  try {
    await access(path, constants.R_OK)
  } catch (error) {
    throw new ServegateError('CONFIG_INVALID', `${flag}: cannot read ${path} (permission denied)`, { cause: error })
  }
}
