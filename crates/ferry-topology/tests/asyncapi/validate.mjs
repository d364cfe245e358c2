// Validates AsyncAPI documents with the official parser, with the Avro and Protobuf schema
// parsers registered so that payloads in those formats are checked too.
//
//   node validate.mjs FILE...
//
// Prints each file's diagnostics of severity error (and a count of the lesser ones) and
// exits 1 when any file has an error, 2 on bad usage.
import { readFileSync } from 'node:fs';
import { Parser, DiagnosticSeverity } from '@asyncapi/parser';
import { AvroSchemaParser } from '@asyncapi/avro-schema-parser';
import { ProtoBuffSchemaParser } from '@asyncapi/protobuf-schema-parser';

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: node validate.mjs FILE...');
  process.exit(2);
}

const parser = new Parser();
parser.registerSchemaParser(AvroSchemaParser());
parser.registerSchemaParser(ProtoBuffSchemaParser());

let failed = false;
for (const file of files) {
  const { document, diagnostics } = await parser.parse(readFileSync(file, 'utf8'));
  const errors = diagnostics.filter((d) => d.severity === DiagnosticSeverity.Error);
  if (errors.length > 0 || document === undefined) {
    failed = true;
    console.log(`${file}: ${errors.length} error(s)`);
    for (const error of errors) {
      console.log(`  ${error.code} at /${error.path.join('/')}: ${error.message}`);
    }
  } else {
    const others = diagnostics.length;
    console.log(`${file}: valid (${others} warning(s) or hint(s))`);
  }
}
process.exit(failed ? 1 : 0);
