// The fixed inputs of the fidelity gate (fidelity_gate.h): short queries and the opening of
// manual pages in several languages, from corpus/queries.jsonl, corpus/docs_en.jsonl and
// corpus/docs_multi.jsonl (the first entry of each language; documents cut at 700 characters).
// Generated once from those files; they change only with them.
#include "app/fidelity_gate.h"

namespace quiver::app {

const std::vector<std::string>& FidelityTexts() {
  static const std::vector<std::string> kTexts = {
      "Informationen, die mit Groff verwendet werden sollen, zu Troff-Schriftdateien hinzufügen",
      "get entries from Name Service Switch libraries",
      "Afficher le nom de l'architecture matérielle de la machine (identique à uname -m)",
      "netatalk の Apple Macintosh ファイルが含まれているディレクトリを掃除する。",
      "объединяет файлы и направляет их на стандартный вывод",
      "输出用户连接时间",
      "NAME\n       getent - get entries from Name Service Switch libraries\n\nSYNOPSIS\n       "
      "getent [option]... database key...\n\nDESCRIPTION\n       The  getent  command  displays "
      "entries from databases supported by the Name Service Switch\n       libraries, which are "
      "configured in /etc/nsswitch.conf.  If one or more key  arguments  are\n       provided,  "
      "then  only  the  entries  that  match  the  supplied  keys  will  be displayed.\n       "
      "Otherwise, if no key is provided, all entries will be displayed (unless the database  "
      "does\n       not support enumeration).\n\n       The database may be any of those supported "
      "by the GNU C Library, listed below:\n\n          ahosts    When  no key is provided, use "
      "seth",
      "NAME\n       iconv - convert text from one character encoding to another\n\nSYNOPSIS\n      "
      " iconv [options] [-f from-encoding] [-t to-encoding] [inputfile]...\n\nDESCRIPTION\n       "
      "The  iconv program reads in text in one encoding and outputs the text in another "
      "encoding.\n       If no input files are given, or if it is given as a dash (-), iconv  "
      "reads  from  standard\n       input.  If no output file is given, iconv writes to standard "
      "output.\n\n       If  no  from-encoding is given, the default is derived from the current "
      "locale's character\n       encoding.  If no to-encoding is given, the default is derived "
      "from  the  current  locale's\n       character encoding.\n\nOPTIONS\n       -f "
      "from-encoding, -",
      "NAME\n       intro - introduction to user commands\n\nDESCRIPTION\n       Section  1 of the "
      "manual describes user commands and tools, for example, file manipulation\n       tools, "
      "shells, compilers, web browsers, file and image viewers and editors, and so on.\n\nNOTES\n  "
      "     Linux is a flavor of UNIX, and as a first approximation all user commands under UNIX  "
      "work\n       precisely the same under Linux (and FreeBSD and lots of other UNIX-like "
      "systems).\n\n       Under Linux, there are GUIs (graphical user interfaces), where you can "
      "point and click and\n       drag, and hopefully get work done  without  first  reading  "
      "lots  of  documentation.   The\n       traditional UNIX environment is a CLI (command ",
      "NAME\n       ldd - print shared object dependencies\n\nSYNOPSIS\n       ldd [option]... "
      "file...\n\nDESCRIPTION\n       ldd prints the shared objects (shared libraries) required by "
      "each program or shared object\n       specified on the command line.  An example of its use "
      "and output is the following:\n\n           $ ldd /bin/ls\n               linux-vdso.so.1 "
      "(0x00007ffcc3563000)\n               libselinux.so.1 => /lib64/libselinux.so.1 "
      "(0x00007f87e5459000)\n               libcap.so.2 => /lib64/libcap.so.2 "
      "(0x00007f87e5254000)\n               libc.so.6 => /lib64/libc.so.6 (0x00007f87e4e92000)\n   "
      "            libpcre.so.1 => /lib64/libpcre.so.1 (0x00007f87e4c22000)\n               "
      "libdl.so.2 => /lib64/libdl.s",
      "BEZEICHNUNG\n       addftinfo  - Informationen, die mit Groff verwendet werden sollen, zu "
      "Troff-Schriftdateien\n       hinzufügen\n\nÜBERSICHT\n       addftinfo [-asc-height n] "
      "[-body-depth n] [-body-height n] [-cap-height n]\n                 [-comma-depth n] "
      "[-desc-depth n] [-fig-height n] [-x-height n] Auflösung\n                 Einheitsbreite "
      "Schrift\n\n       addftinfo --help\n\n       addftinfo -v\n       addftinfo "
      "--version\n\nBESCHREIBUNG\n       addftinfo liest eine Troff-Schriftdatei und fügt einige  "
      "Informationen  zur  Schriftmetrik\n       hinzu,  die  vom Groff-System verwendet werden. "
      "Die Schriftdatei, zu der die Informationen\n       hinzugefügt  wurden,  wird  in  die   "
      "Standardausgabe   ges",
      "NOM\n       arch - Afficher le nom de l'architecture matérielle de la machine (identique à "
      "uname -m)\n\nSYNOPSIS\n       arch [OPTION]...\n\nDESCRIPTION\n       Afficher "
      "l'architecture de la machine.\n\n       --help afficher l'aide-mémoire et quitter.\n\n      "
      " --version\n              afficher les informations de version et quitter.\n\nAUTEUR\n      "
      " Écrit par David MacKenzie et Karel Zak.\n\nSIGNALER DES BOGUES\n       Aide en ligne de "
      "GNU coreutils : <https://www.gnu.org/software/coreutils/>\n       Signaler toute erreur de "
      "traduction à <https://translationproject.org/team/fr.html>\n\nCOPYRIGHT\n       Copyright  "
      "©  2022  Free  Software  Foundation, Inc. Licence GPLv3+ : GNU GPL version 3 ou\n       "
      "ultérieure",
      "ИМЯ\n       cat - объединяет файлы и направляет их на стандартный вывод\n\nСИНТАКСИС\n      "
      " cat [ПАРАМЕТР]... [ФАЙЛ]...\n\nОПИСАНИЕ\n       Объединяет ФАЙЛ(ы) и выводит данные в "
      "стандартный вывод.\n\n       Если ФАЙЛ не задан или задан как -, читает стандартный "
      "ввод.\n\n       -A, --show-all\n              эквивалентно  -vET\n\n       -b, "
      "--number-nonblank\n              нумеровать непустые строки при выводе, подавляет -n\n\n    "
      "   -e     эквивалентно -vE\n\n       -E, --show-ends\n              выводить $ в конце "
      "каждой строки\n\n       -n, --number\n              нумеровать все строки при выводе\n\n    "
      "   -s, --squeeze-blank\n              выводить не более одной пустой строки при повторе\n\n "
      "      -t     эквивалент",
      "NAME\n       ac  - 输出用户连接时间\n\n总览\n       ac     [ -d | --daily-totals ] [ -y | "
      "--print-year ]\n              [ -p | --individual-totals ] [ people ]\n              [ -f | "
      "--file filename ] [ -a | --all-days ]\n              [ --complain ] [ --reboots ] [ "
      "--supplants ]\n              [ --timewarps ] [ --compatibility ]\n              [ "
      "--tw-leniency num ] [ --tw-suspicious num ]\n              [ -z | --print-zeros ] [ --debug "
      "]\n              [ -V | --version ] [ -h | --help ]\n\n描述\n       基于当前的   "
      "/var/log/wtmp  文件中的登录和退出时间输出一个  关于连接时间(以小时为单位)的报\n       "
      "告。并且还输出一个总计时间。\n\n       审计文件 /var/log/wtmp 由 init(8) 和 login(1) "
      "维护。ac 和 login  均不生成 /var/log/wtmp 文\n       件，如果审计文件不存在，则不 "
      "做审计工作。如果要开始审计，应生成一个长度为零的审计文件。\n\n  ",
  };
  return kTexts;
}

}  // namespace quiver::app
