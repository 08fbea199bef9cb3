import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, test } from 'vitest'
import { targetAccess } from './cli/cell-flags.ts'
import { resolveEngineConfig } from './engines/config.ts'
import { trustedCa } from './http-request.ts'
import { parseBaseUrl, trustCaFile } from './loopback.ts'
import { resolveCellOptions } from './runner/cell-options.ts'

describe('parseBaseUrl', () => {
  test('loopback needs nothing and is not remote', () => {
    expect(parseBaseUrl('http://127.0.0.1:8000/v1')).toEqual({
      origin: 'http://127.0.0.1:8000',
      display: 'http://127.0.0.1:8000',
      host: '127.0.0.1:8000',
      remote: false,
    })
    expect(parseBaseUrl('http://[::1]:9/', true).remote).toBe(false)
  })

  test('a remote host is refused unless named on purpose, and the error names --remote and remote: true', () => {
    expect(() => parseBaseUrl('http://10.1.2.3:8000')).toThrow(
      /10\.1\.2\.3 is not a loopback address.*nothing was sent.*--remote.*remote: true/,
    )
    expect(parseBaseUrl('https://gateway.example:8443/v1', true)).toEqual({
      origin: 'https://gateway.example:8443',
      display: 'https://gateway.example:8443',
      host: 'gateway.example:8443',
      remote: true,
    })
  })

  test('an external engine declares remote: true, or fails at declaration naming it', () => {
    expect(() => resolveEngineConfig({ kind: 'external', baseUrl: 'http://10.1.2.3:8000', model: { id: 'm' } })).toThrow(
      /invalid engine config: engine\.baseUrl: 10\.1\.2\.3 is not a loopback address.*remote: true/,
    )
    const config = resolveEngineConfig({ kind: 'external', baseUrl: 'http://10.1.2.3:8000', model: { id: 'm' }, remote: true })
    expect(config).toMatchObject({ kind: 'external', remote: true })
    expect(resolveEngineConfig({ kind: 'external', baseUrl: 'http://127.0.0.1:8000', model: { id: 'm' } })).toMatchObject({ remote: false })
  })

  test('runCell options take the same remote: true', () => {
    expect(() => resolveCellOptions({ baseUrl: 'http://10.1.2.3:8000', model: 'm' })).toThrow(/not a loopback address.*remote: true/)
    expect(resolveCellOptions({ baseUrl: 'http://10.1.2.3:8000', model: 'm', remote: true })).toMatchObject({ remote: true })
    expect(resolveCellOptions({ baseUrl: 'http://127.0.0.1:8000', model: 'm' }).remote).toBe(false)
  })

  test('--remote and --ca-file go with --base-url; with --engine they belong in the engine file', () => {
    expect(targetAccess({ 'base-url': 'http://10.1.2.3:8000', remote: true, 'ca-file': '/ca.pem' })).toEqual({
      remote: true,
      caFile: '/ca.pem',
    })
    expect(targetAccess({ 'base-url': 'http://127.0.0.1:8000' })).toEqual({ remote: false })
    expect(() => targetAccess({ engine: 'e.json', remote: true })).toThrow(
      /--remote goes with --base-url; with --engine set it in the engine file/,
    )
    expect(() => targetAccess({ engine: 'e.json', 'ca-file': 'ca.pem' })).toThrow(/--ca-file goes with --base-url/)
  })
})

describe('trustCaFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-ca-'))
  const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n'

  test('registers the CA for that origin only', () => {
    const file = join(dir, 'ca.pem')
    writeFileSync(file, pem)
    trustCaFile('https://10.9.9.2:8443', file, 'caFile')
    expect(trustedCa('https://10.9.9.2:8443/v1/models')).toBe(pem)
    expect(trustedCa('https://10.9.9.2:9443')).toBeUndefined()
  })

  test('refuses plain HTTP, an unreadable file and one without a certificate, naming the field', () => {
    const file = join(dir, 'not-pem.txt')
    writeFileSync(file, 'hello')
    expect(() => trustCaFile('http://10.9.9.2:80', file, '--ca-file')).toThrow(/--ca-file: a CA file verifies an https:\/\/ endpoint/)
    expect(() => trustCaFile('https://10.9.9.2', join(dir, 'missing.pem'), 'caFile')).toThrow(
      /caFile: cannot read .*missing\.pem \(ENOENT\)/,
    )
    expect(() => trustCaFile('https://10.9.9.2', file, 'engine.caFile')).toThrow(/engine\.caFile: .* holds no PEM certificate/)
  })
})
