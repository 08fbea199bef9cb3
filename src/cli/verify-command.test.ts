/**
 * `servegate verify --public-key`: a signed evidence directory is checked against the key that
 * signed it; and any directory is a closed world, refused file by file when something was planted.
 */
import { generateKeyPairSync } from 'node:crypto'
import { cp, readFile, truncate, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { expect } from 'vitest'
import { reseal } from '../../fixtures/evidence-seal.ts'
import { test } from '../../fixtures/test-context.ts'
import { buildEvidence } from '../evidence/build.ts'
import { DEFAULT_RENDERERS } from '../evidence/renderers.ts'
import { MAX_EVIDENCE_FILE_BYTES, SIGNATURE_FILE, writeEvidence } from '../evidence/write.ts'
import { runCell } from '../runner/measure-cell.ts'

const keys = generateKeyPairSync('ed25519')

test.override('simOptions', { model: 'm', prefillTokPerS: 40_000, decodeTokPerS: 400, seed: 5 })

test.beforeAll(async ({ simEngine, tmpDir }) => {
  const record = await runCell({ baseUrl: simEngine.url, model: 'm', requests: 8, maxTokens: 8, workload: { promptTokens: 32 } })
  const cell = { id: 'c', kind: 'cell' as const, required: true, ladder: null, engines: { cell: 'sim' }, status: 'measured' as const }
  const built = buildEvidence([{ file: 'a.bench.ts', meta: { cells: [{ ...cell, error: null, records: { cell: [record] } }] } }], [], {
    suiteCommit: null,
    redact: false,
  })
  await writeEvidence(join(tmpDir, 'signed'), built, DEFAULT_RENDERERS, { signingKey: keys.privateKey })
  await writeEvidence(join(tmpDir, 'unsigned'), built, DEFAULT_RENDERERS, { signingKey: null })
  await writeFile(join(tmpDir, 'public.pem'), keys.publicKey.export({ type: 'spki', format: 'pem' }))
  await writeFile(join(tmpDir, 'other.pem'), generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }))
  await writeFile(join(tmpDir, 'private.pem'), keys.privateKey.export({ type: 'pkcs8', format: 'pem' }))
}, 60_000)

test('the signing key verifies; without --public-key the signature is said to be unchecked', async ({ cli, tmpDir }) => {
  const ok = await cli(['verify', join(tmpDir, 'signed'), '--public-key', join(tmpDir, 'public.pem')])
  expect(ok).toMatchObject({ code: 0, stderr: '' })
  expect(ok.stdout).toMatch(/every verdict decides again as recorded; SHA256SUMS\.sig is .*public\.pem's signature\n$/)
  expect((await cli(['verify', join(tmpDir, 'signed')])).stdout).toMatch(/; SHA256SUMS\.sig not checked \(pass --public-key FILE\)\n$/)
})

test('another key, a missing signature and a private key given as the public one each fail, saying why', async ({ cli, tmpDir }) => {
  const other = await cli(['verify', join(tmpDir, 'signed'), '--public-key', join(tmpDir, 'other.pem')])
  expect(other.code).toBe(1)
  expect(other.stderr).toMatch(
    new RegExp(`^servegate verify: ${SIGNATURE_FILE.replace('.', '\\.')}: not a signature of SHA256SUMS by this public key`, 'm'),
  )
  const unsigned = await cli(['verify', join(tmpDir, 'unsigned'), '--public-key', join(tmpDir, 'public.pem')])
  expect(unsigned.code).toBe(1)
  expect(unsigned.stderr).toMatch(/^servegate verify: SHA256SUMS\.sig: missing, but a public key was given: this evidence is not signed/m)
  const privateKey = await cli(['verify', join(tmpDir, 'signed'), '--public-key', join(tmpDir, 'private.pem')])
  expect(privateKey.code).toBe(2)
  expect(privateKey.stderr).toMatch(/^servegate: --public-key .*private\.pem: holds a private key; pass its public key instead/)
  expect(privateKey.stderr).not.toContain('BEGIN')
  expect((await cli(['verify', join(tmpDir, 'signed'), '--public-key'])).stderr).toMatch(/^servegate: --public-key needs a value/)
})

test('a planted look-alike, an unreferenced file and a duplicated key, each sealed again, are refused naming the file', async ({
  cli,
  tmpDir,
}) => {
  const planted = join(tmpDir, 'planted')
  await cp(join(tmpDir, 'unsigned'), planted, { recursive: true })
  const record = await readFile(join(planted, 'runs/cell/c.json'))
  await writeFile(join(planted, 'runs/cell/t\u0456ny.json'), record)
  await writeFile(join(planted, 'junk.bin'), Buffer.alloc(64, 0xff))
  await reseal(planted)
  const refused = await cli(['verify', planted])
  expect(refused.code).toBe(1)
  expect(refused.stderr).toMatch(
    /^servegate verify: runs\/cell\/t\\u\{456\}ny\.json: its name holds "і" \(U\+0456\), outside the safe set/m,
  )
  expect(refused.stderr).toMatch(/^servegate verify: runs\/cell\/t\\u\{456\}ny\.json: not referenced by index\.json/m)
  expect(refused.stderr).toMatch(
    /^servegate verify: junk\.bin: not referenced by index\.json and not one of index\.json, SHA256SUMS, SHA256SUMS\.sig/m,
  )
  expect(refused.stderr).toMatch(/: 3 problem\(s\)\n$/)

  const duplicated = join(tmpDir, 'duplicated')
  await cp(join(tmpDir, 'unsigned'), duplicated, { recursive: true })
  const index = await readFile(join(duplicated, 'index.json'), 'utf8')
  await writeFile(join(duplicated, 'index.json'), index.replace('{\n', '{\n  "schema": "servegate.evidence/v0",\n'))
  await reseal(duplicated)
  const twice = await cli(['verify', duplicated])
  expect(twice.code).toBe(1)
  expect(twice.stderr).toMatch(/^servegate verify: \S+index\.json: the key "schema" appears twice in one object, at \$\.schema \(line 3\)/m)
})

test('a file past the 1 GiB bound is refused by its size alone, never read', async ({ cli, tmpDir }) => {
  const padded = join(tmpDir, 'padded')
  await cp(join(tmpDir, 'unsigned'), padded, { recursive: true })
  // Sparse: one byte past the bound, on no disk. Verify reads its size, not its bytes.
  await truncate(join(padded, 'README.md'), MAX_EVIDENCE_FILE_BYTES + 1)
  const r = await cli(['verify', padded])
  expect(r.code).toBe(1)
  expect(r.stderr).toMatch(
    /^servegate verify: README\.md: 1073741825 bytes, over the 1073741824-byte bound of a file of evidence; servegate writes none so large, and verify does not read it$/m,
  )
  expect(r.stderr).not.toMatch(/README\.md: sha256/)
})
