// Package geo looks up the autonomous system (number and organization) and
// the country of an IP address in local database files in the MaxMind DB
// format: MaxMind's GeoLite2-ASN and GeoLite2-Country, DB-IP's IP to ASN
// Lite and IP to Country Lite, IPinfo Lite (one file for both).
//
// Specifications:
//   - MaxMind DB File Format Specification, version 2.0
//     (https://maxmind.github.io/MaxMind-DB/): the search tree, the data
//     section and the metadata (database_type, build_epoch, ip_version).
//   - The record layouts of the databases above: GeoLite2-ASN and DB-IP's
//     ASN Lite (autonomous_system_number, autonomous_system_organization),
//     GeoLite2-Country and DB-IP's Country Lite (country.iso_code), IPinfo
//     Lite (asn as "AS13335", as_name, country_code; its country field is
//     the country's name and is not used).
//   - ISO 3166-1 alpha-2 for Info.Country, upper-cased.
//
// Files are read with github.com/oschwald/maxminddb-golang/v2 from memory,
// not mapped: a file is read whole (at most MaxFileBytes), verified
// (maxminddb's Reader.Verify walks the whole tree and data section, so a
// corrupt file is refused when it is opened, not met in a lookup) and
// replaced by a reload with an atomic pointer swap. The version a reload
// replaced is garbage-collected once no lookup uses it; nothing is unmapped
// under a lookup in flight.
//
// A lookup decodes only the fields it needs, once per distinct database
// record (records are keyed by their data-section offset), and then serves
// the record from memory: repeated lookups do not allocate, and the
// organization strings are shared by every network of a record.
//
// The package never logs: Open and Reload return errors that name the file,
// and Run reports reloads to Config.OnReload.
package geo
