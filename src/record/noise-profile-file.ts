import { mkdir, rename, writeFile } from 'node:fs/promises'
import { dirname, resolve } from 'node:path'
import { z } from 'zod'
import { ServegateError } from '../errors.ts'
import { NoiseProfile } from '../schema/noise.ts'

/**
 * Writes a noise profile (`servegate.noise-profile/v1`) at `path`, checked against its schema,
 * atomically (a temp file beside it, then a rename), the folders it needs created.
 * @returns the absolute path written
 * @throws ServegateError INTERNAL when the profile does not match its schema
 */
export async function writeNoiseProfile(path: string, profile: NoiseProfile): Promise<string> {
  const parsed = NoiseProfile.safeParse(profile)
  if (!parsed.success) throw new ServegateError('INTERNAL', `noise profile not written: ${z.prettifyError(parsed.error)}`)
  const out = resolve(path)
  await mkdir(dirname(out), { recursive: true })
  const tmp = `${out}.${process.pid}.tmp`
  await writeFile(tmp, `${JSON.stringify(parsed.data, null, 2)}\n`)
  await rename(tmp, out)
  return out
}
